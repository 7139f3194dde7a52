package enginesim

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// FaultHeader is the request header that sets faults and behaviours for one request, as
// comma-separated directives, for example "stall_after=5" or "status=503,delay=2s".
const FaultHeader = "X-Enginesim"

// Faults are deliberate misbehaviours of the simulated engine. The zero value is a
// healthy engine. Global faults come from flags; a request's FaultHeader adds to them.
type Faults struct {
	Status         int           // answer with this HTTP status instead of serving; 500 if only StatusRate is set
	StatusRate     float64       // fraction of requests answered with Status, in (0,1]; 1 if only Status is set
	StallAfter     int           // stop sending after this many output tokens, keeping the connection open (0 = off)
	DropAfter      int           // close the connection mid-stream after this many output tokens (0 = off)
	ErrorAfter     int           // fail the generation after this many output tokens, as the engines do (0 = off; see errorEvent)
	FirstByteDelay time.Duration // wait this long before sending anything
	Loop           bool          // the answer repeats one phrase
	Reasoning      int           // chat: send the first N output tokens as reasoning_content
}

// ErrBadFault reports an unparseable fault directive.
var ErrBadFault = errors.New("enginesim: bad fault directive")

// ParseFaults parses FaultHeader directives: status=CODE, rate=FRACTION, stall_after=N,
// drop_after=N, error_after=N, delay=DURATION, loop, reasoning=N. Unknown directives are errors, so a typo
// in a test cannot silently disable a fault.
func ParseFaults(s string) (Faults, error) {
	var f Faults
	for _, d := range strings.Split(s, ",") {
		d = strings.TrimSpace(d)
		if d == "" {
			continue
		}
		key, val, hasVal := strings.Cut(d, "=")
		if err := f.set(strings.TrimSpace(key), strings.TrimSpace(val), hasVal); err != nil {
			return Faults{}, fmt.Errorf("%w %q: %v", ErrBadFault, d, err)
		}
	}
	return f.normalized(), nil
}

// normalized completes a status fault given by half: a status alone always fires, a rate
// alone answers 500.
func (f Faults) normalized() Faults {
	switch {
	case f.Status != 0 && f.StatusRate == 0:
		f.StatusRate = 1
	case f.Status == 0 && f.StatusRate != 0:
		f.Status = http.StatusInternalServerError
	}
	return f
}

func (f *Faults) set(key, val string, hasVal bool) error {
	if key == "loop" {
		if hasVal {
			return errors.New("loop takes no value")
		}
		f.Loop = true
		return nil
	}
	if !hasVal {
		return errors.New("missing value")
	}
	var err error
	switch key {
	case "status":
		f.Status, err = strconv.Atoi(val)
		if err == nil && (f.Status < 400 || f.Status > 599) {
			err = errors.New("status must be 400-599")
		}
	case "rate":
		f.StatusRate, err = strconv.ParseFloat(val, 64)
		if err == nil && !(f.StatusRate > 0 && f.StatusRate <= 1) {
			err = errors.New("rate must be in (0,1]")
		}
	case "stall_after":
		f.StallAfter, err = positive(val)
	case "drop_after":
		f.DropAfter, err = positive(val)
	case "error_after":
		f.ErrorAfter, err = positive(val)
	case "reasoning":
		f.Reasoning, err = positive(val)
	case "delay":
		f.FirstByteDelay, err = time.ParseDuration(val)
		if err == nil && (f.FirstByteDelay < 0 || f.FirstByteDelay > time.Hour) {
			err = errors.New("delay must be in [0, 1h]")
		}
	default:
		err = errors.New("unknown directive")
	}
	return err
}

func positive(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		return 0, errors.New("must be a positive integer")
	}
	return n, nil
}

// merge returns f with every fault set in o added; o wins where both set one.
func (f Faults) merge(o Faults) Faults {
	if o.Status != 0 {
		f.Status, f.StatusRate = o.Status, o.StatusRate
	}
	if o.StallAfter != 0 {
		f.StallAfter = o.StallAfter
	}
	if o.DropAfter != 0 {
		f.DropAfter = o.DropAfter
	}
	if o.ErrorAfter != 0 {
		f.ErrorAfter = o.ErrorAfter
	}
	if o.FirstByteDelay != 0 {
		f.FirstByteDelay = o.FirstByteDelay
	}
	if o.Reasoning != 0 {
		f.Reasoning = o.Reasoning
	}
	f.Loop = f.Loop || o.Loop
	return f
}
