package soak

import (
	"fmt"
	"io"
	"sort"
	"sync/atomic"
)

// Outcome is how one request ended, as its client saw it.
type Outcome uint8

// The outcomes. Those from Unexplained5xx on are failures of the proxy: a 5xx or a broken
// answer to a request that asked for no fault, no answer at all, or no end.
const (
	OK             Outcome = iota // a complete answer: [DONE] for a stream, a valid body otherwise
	Cancelled                     // the client went away on purpose (or the load's end cut it)
	Rejected                      // 429 from admission control
	BadRequest                    // 400
	TooLarge                      // 413
	OtherClient                   // another 4xx
	EngineFault                   // the fault the request asked the engine for: its 5xx, or a cut stream
	Unexplained5xx                // a 5xx on a request that asked for no fault
	Broken                        // 200, then an answer cut short or malformed, with no fault asked for
	NoAnswer                      // no response and not cancelled: the connection failed
	numOutcomes
)

var outcomeNames = [numOutcomes]string{
	"ok", "cancelled", "rejected_429", "bad_request_400", "too_large_413", "other_4xx",
	"engine_fault", "unexplained_5xx", "broken", "no_answer",
}

// String returns the outcome's name, e.g. "rejected_429".
func (o Outcome) String() string {
	if o < numOutcomes {
		return outcomeNames[o]
	}
	return "unknown"
}

// Failure reports whether the outcome is a failure of the proxy.
func (o Outcome) Failure() bool { return o >= Unexplained5xx && o < numOutcomes }

// Tally counts requests by kind and outcome, inference requests by the status their
// client got and by whether slogate counted them for certain. Safe for concurrent use.
type Tally struct {
	byKind    [numKinds][numOutcomes]atomic.Int64
	status    [600]atomic.Int64 // of inference requests
	counted   atomic.Int64      // inference requests slogate's handler certainly read
	uncertain atomic.Int64      // inference requests that failed before any sign of that
	unread    atomic.Int64      // of the counted, cancelled before their status was read
	faults    atomic.Int64      // requests that asked the engine for a fault
}

// add records one finished request.
func (t *Tally) add(k Kind, fault Fault, e end) {
	t.byKind[k][e.outcome].Add(1)
	if fault != NoFault {
		t.faults.Add(1)
	}
	if k == Passthrough {
		return
	}
	if e.status > 0 && e.status < len(t.status) {
		t.status[e.status].Add(1)
	}
	switch {
	case e.reached && e.status == 0:
		t.counted.Add(1)
		t.unread.Add(1)
	case e.reached:
		t.counted.Add(1)
	default:
		t.uncertain.Add(1)
	}
}

// Count returns the requests of kind k that ended with outcome o.
func (t *Tally) Count(k Kind, o Outcome) int64 { return t.byKind[k][o].Load() }

// Outcomes returns the requests that ended with outcome o, of every kind.
func (t *Tally) Outcomes(o Outcome) int64 {
	var n int64
	for k := range numKinds {
		n += t.byKind[k][o].Load()
	}
	return n
}

// Total returns every request sent, passthrough included.
func (t *Tally) Total() int64 {
	var n int64
	for o := range numOutcomes {
		n += t.Outcomes(Outcome(o))
	}
	return n
}

// Failures returns the requests whose outcome is a failure of the proxy.
func (t *Tally) Failures() int64 {
	var n int64
	for o := range numOutcomes {
		if Outcome(o).Failure() {
			n += t.Outcomes(Outcome(o))
		}
	}
	return n
}

// Statuses returns the inference requests by the status their client got.
func (t *Tally) Statuses() map[int]int64 {
	out := make(map[int]int64)
	for c := range t.status {
		if n := t.status[c].Load(); n > 0 {
			out[c] = n
		}
	}
	return out
}

// Counted returns the inference requests slogate's handler certainly read (their client
// got a status, or the 100 Continue slogate sends as it reads the body): slogate must have
// counted each of them in slogate_requests_total. Unread of them were cancelled before
// their client read the status, so which status slogate counted them under is unknown.
func (t *Tally) Counted() (counted, unread int64) { return t.counted.Load(), t.unread.Load() }

// Uncertain returns the inference requests that failed before any sign that slogate read
// them: slogate may or may not have counted them.
func (t *Tally) Uncertain() int64 { return t.uncertain.Load() }

// Faults returns the requests that asked the engine for a fault.
func (t *Tally) Faults() int64 { return t.faults.Load() }

// WriteMarkdown writes the tally as Markdown tables: outcomes by kind, then statuses.
func (t *Tally) WriteMarkdown(w io.Writer) {
	fmt.Fprint(w, "| kind |")
	var used []Outcome
	for o := range numOutcomes {
		if t.Outcomes(Outcome(o)) > 0 {
			used = append(used, Outcome(o))
			fmt.Fprintf(w, " %s |", Outcome(o))
		}
	}
	fmt.Fprint(w, " total |\n|---|")
	for range len(used) + 1 {
		fmt.Fprint(w, "---:|")
	}
	fmt.Fprintln(w)
	for _, k := range Kinds() {
		fmt.Fprintf(w, "| %s |", k)
		var sum int64
		for _, o := range used {
			n := t.Count(k, o)
			sum += n
			fmt.Fprintf(w, " %d |", n)
		}
		fmt.Fprintf(w, " %d |\n", sum)
	}
	fmt.Fprint(w, "| **all** |")
	for _, o := range used {
		fmt.Fprintf(w, " %d |", t.Outcomes(o))
	}
	fmt.Fprintf(w, " %d |\n\n", t.Total())
	st := t.Statuses()
	codes := make([]int, 0, len(st))
	for c := range st {
		codes = append(codes, c)
	}
	sort.Ints(codes)
	fmt.Fprint(w, "| status |")
	for _, c := range codes {
		fmt.Fprintf(w, " %d |", c)
	}
	fmt.Fprint(w, "\n|---|")
	for range codes {
		fmt.Fprint(w, "---:|")
	}
	fmt.Fprint(w, "\n| inference requests |")
	for _, c := range codes {
		fmt.Fprintf(w, " %d |", st[c])
	}
	fmt.Fprintln(w)
}
