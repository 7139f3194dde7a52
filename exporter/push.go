package exporter

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	vm "github.com/VictoriaMetrics/metrics"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// ErrInvalidPush reports Push arguments it cannot use.
var ErrInvalidPush = errors.New("exporter: invalid push configuration")

// Push sends every metric g gathers to pushURL every interval, until ctx is done; then
// it waits for the push worker to stop and returns nil. It returns at once with an
// error wrapping ErrInvalidPush when pushURL is not an http(s) URL with a host, interval
// is not positive, or extraLabels is malformed. Errors never contain the URL's password.
//
// Each push is an HTTP POST of the Prometheus text format (gzip-compressed, as
// github.com/VictoriaMetrics/metrics sends it), which VictoriaMetrics'
// /api/v1/import/prometheus and vmagent accept. The first push happens one interval
// after the call; nothing is pushed when ctx ends. extraLabels is a comma-separated list
// of label="value" pairs added to every sample, e.g. `pod="a",namespace="b"`: distinct
// Prometheus label names (no "__" prefix), non-empty values escaped as in the text
// format; they must not clash with the metrics' own labels. A push that fails is logged
// and retried at the next interval; a family that fails to encode is logged and left
// out. A nil logger discards.
func Push(ctx context.Context, pushURL string, interval time.Duration, g prometheus.Gatherer, extraLabels string, logger *slog.Logger) error {
	logger, err := checkPush(pushURL, g, extraLabels, logger)
	if err != nil {
		return err
	}
	if interval <= 0 {
		return fmt.Errorf("%w: interval %v is not positive", ErrInvalidPush, interval)
	}
	var wg sync.WaitGroup
	opts := &vm.PushOptions{
		ExtraLabels: extraLabels,
		Method:      http.MethodPost,
		WaitGroup:   &wg,
		LogErr: func(format string, args ...any) {
			logger.Warn("pushing metrics failed", "err", fmt.Sprintf(format, args...))
		},
	}
	write := func(w io.Writer) { writeText(w, g, logger) }
	if err := vm.InitPushExtWithOptions(ctx, pushURL, interval, write, opts); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidPush, err)
	}
	<-ctx.Done()
	wg.Wait()
	return nil
}

// PushOnce sends every metric g gathers to pushURL once, as Push does at each interval,
// and returns the push's error, if any (never containing the URL's password). For
// one-shot jobs, such as a probe run from a CronJob, that are never scraped.
func PushOnce(ctx context.Context, pushURL string, g prometheus.Gatherer, extraLabels string, logger *slog.Logger) error {
	logger, err := checkPush(pushURL, g, extraLabels, logger)
	if err != nil {
		return err
	}
	opts := &vm.PushOptions{ExtraLabels: extraLabels, Method: http.MethodPost}
	if err := vm.PushMetricsExt(ctx, pushURL, func(w io.Writer) { writeText(w, g, logger) }, opts); err != nil {
		return fmt.Errorf("pushing metrics: %w", err) // the library names the URL redacted
	}
	return nil
}

// checkPushURL validates the URL before the push library sees it, so that errors can
// show it redacted.
func checkPushURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("%w: the push URL does not parse", ErrInvalidPush)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%w: push URL %s: want an http or https URL with a host", ErrInvalidPush, u.Redacted())
	}
	return nil
}

// checkPushLabels validates extra labels as Prometheus labels, which the push library
// checks less strictly (it takes a newline in a value, a name with a dot, a name twice,
// an escape the text format does not have), so that labels every push would then carry
// to a receiver that refuses it are refused at once: a comma-separated list (a comma may
// be followed by spaces) of name="value" pairs whose names are distinct Prometheus label
// names not reserved (no "__" prefix), whose values are non-empty valid UTF-8 on one line
// and escape only as the text format does (\\, \", \n).
func checkPushLabels(s string) error {
	seen := map[string]bool{}
	for rest := s; rest != ""; {
		name, after, ok := strings.Cut(rest, "=")
		switch {
		case !ok:
			return fmt.Errorf("%w: extra labels: want name=\"value\" after %q", ErrInvalidPush, rest)
		case !model.LabelName(name).IsValidLegacy() || strings.HasPrefix(name, "__"):
			return fmt.Errorf("%w: extra labels: %q is not a label name", ErrInvalidPush, name)
		case seen[name]:
			return fmt.Errorf("%w: extra labels: %q given twice", ErrInvalidPush, name)
		}
		seen[name] = true
		n, err := labelValueLen(after)
		if err != nil {
			return fmt.Errorf("%w: extra labels: the value of %s: %w", ErrInvalidPush, name, err)
		}
		if rest = after[n:]; rest == "" {
			break
		}
		if rest[0] != ',' || strings.TrimLeft(rest[1:], " ") == "" {
			return fmt.Errorf("%w: extra labels: want a comma and another label before %q", ErrInvalidPush, rest)
		}
		rest = strings.TrimLeft(rest[1:], " ")
	}
	return nil
}

// labelValueLen returns the length of the quoted label value s starts with, quotes
// included.
func labelValueLen(s string) (int, error) {
	if !strings.HasPrefix(s, `"`) {
		return 0, errors.New(`want a value in double quotes`)
	}
	for i := 1; i < len(s); i++ {
		switch s[i] {
		case '"':
			if i == 1 {
				return 0, errors.New("empty (an empty value is no label)")
			}
			if !utf8.ValidString(s[1:i]) {
				return 0, errors.New("not valid UTF-8")
			}
			return i + 1, nil
		case '\\':
			if i+1 == len(s) || !strings.ContainsRune(`\"n`, rune(s[i+1])) {
				return 0, errors.New(`a backslash escapes only \\, \" or \n`)
			}
			i++
		case '\n':
			return 0, errors.New(`a line break (write it \n)`)
		}
	}
	return 0, errors.New("no closing double quote")
}

// writeText writes the families g gathers to w in the Prometheus text format. Each
// family is encoded on its own first, so a family that fails to encode leaves no
// partial line behind; a gathering error still writes what was gathered.
func writeText(w io.Writer, g prometheus.Gatherer, logger *slog.Logger) {
	fams, err := g.Gather()
	if err != nil {
		logger.Warn("gathering metrics to push", "err", err)
	}
	var buf bytes.Buffer
	enc := expfmt.NewEncoder(&buf, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, mf := range fams {
		buf.Reset()
		if err := enc.Encode(mf); err != nil {
			logger.Warn("encoding metrics to push", "metric", mf.GetName(), "err", err)
			continue
		}
		if _, err := w.Write(buf.Bytes()); err != nil {
			return
		}
	}
}

// checkPush checks the arguments Push and PushOnce share, and returns the logger to use
// (one that discards for nil).
func checkPush(pushURL string, g prometheus.Gatherer, extraLabels string, logger *slog.Logger) (*slog.Logger, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if err := checkPushURL(pushURL); err != nil {
		return nil, err
	}
	if err := checkPushLabels(extraLabels); err != nil {
		return nil, err
	}
	if g == nil {
		return nil, fmt.Errorf("%w: nil gatherer", ErrInvalidPush)
	}
	return logger, nil
}
