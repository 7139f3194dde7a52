package exporter

import (
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// fuzzPassword is the password in the URLs FuzzPushURL and FuzzPushLabels check errors
// for.
const fuzzPassword = "s3cretPW"

// FuzzPushURL feeds arbitrary push URLs to the check Push and PushOnce make before
// anything else: a refused URL gets an error wrapping ErrInvalidPush that never holds
// the URL's password; an accepted one is http or https with a host.
func FuzzPushURL(f *testing.F) {
	for _, s := range []string{
		"http://vm:8428/api/v1/import/prometheus", "https://u:" + fuzzPassword + "@vm/api/v1/import/prometheus",
		"ftp://u:" + fuzzPassword + "@vm/", "http://u:" + fuzzPassword + "@/path", "http//vm", "", "http://[::1", "http://%zz",
		"HTTP://vm:1", "http://u:" + fuzzPassword + "@vm:bad/", "mailto:u:" + fuzzPassword + "@vm", "http://u@vm",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		err := checkPushURL(raw)
		u, perr := url.Parse(raw)
		if err == nil {
			if perr != nil || u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
				t.Fatalf("checkPushURL accepted %q", raw)
			}
			return
		}
		if !errors.Is(err, ErrInvalidPush) {
			t.Fatalf("checkPushURL(%q) = %v, which does not wrap ErrInvalidPush", raw, err)
		}
		if perr != nil || strings.Count(raw, fuzzPassword) != 1 {
			return
		}
		if pw, ok := u.User.Password(); ok && pw == fuzzPassword && strings.Contains(err.Error(), fuzzPassword) {
			t.Fatalf("checkPushURL(%q) = %q, which shows the password", raw, err)
		}
	})
}

// FuzzPushLabels pushes a registry's metrics once with arbitrary extra labels to an
// endpoint that parses the Prometheus text format, as VictoriaMetrics does. Labels
// PushOnce refuses give an error that never holds the URL's password and push nothing;
// labels it accepts give a push that parses (unless they clash with the metrics' own
// labels, which Push leaves to its caller), with as many samples as were gathered, each
// carrying the same extra labels besides its own.
func FuzzPushLabels(f *testing.F) {
	for _, s := range []string{
		"", `pod="a"`, `pod="a",namespace="b"`, `pod="a", namespace="b"`, `job="slogate-probe",namespace="b"`,
		`pod=a`, `pod="a`, `="a"`, `pod="a",`, `pod="a\"b"`, `pod="a\\"`, `pod="a\nb"`, "pod=\"a\nb\"", `a.b="c"`,
		`a:b="c"`, `__name__="x"`, `tier="clash"`, `pod="a",pod="b"`, `pod="\xff"`, `1pod="a"`, `pod="a\qb"`,
	} {
		f.Add(s)
	}
	recv := &fuzzReceiver{}
	srv := httptest.NewServer(recv)
	f.Cleanup(srv.Close)
	pushURL := strings.Replace(srv.URL, "http://", "http://u:"+fuzzPassword+"@", 1)
	reg := prometheus.NewRegistry()
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "fuzz_gauge", Help: "h"}, []string{"tier"})
	g.WithLabelValues("short").Set(1)
	g.WithLabelValues("long").Set(2)
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "fuzz_total", Help: "h"})
	c.Add(3)
	reg.MustRegister(g, c)
	const samples = 3
	own := map[string]bool{"tier": true}

	f.Fuzz(func(t *testing.T, labels string) {
		recv.reset()
		err := PushOnce(context.Background(), pushURL, reg, labels, nil)
		fams, pushed, perr := recv.last()
		if err != nil {
			if strings.Contains(err.Error(), fuzzPassword) {
				t.Fatalf("PushOnce with labels %q: %q shows the URL's password", labels, err)
			}
			if pushed && perr != nil && !clashes.MatchString(labels) {
				t.Fatalf("PushOnce accepted labels %q, and pushed what does not parse: %v", labels, perr)
			}
			if pushed && perr != nil {
				return // the caller's to avoid, as Push says
			}
			if pushed {
				t.Fatalf("PushOnce with labels %q pushed, then failed: %v", labels, err)
			}
			return
		}
		if !pushed || perr != nil {
			t.Fatalf("PushOnce with labels %q succeeded; pushed %v, parse error %v", labels, pushed, perr)
		}
		checkExtraLabels(t, labels, fams, own, samples)
	})
}

// clashes matches extra labels that name a label of FuzzPushLabels' metrics.
var clashes = regexp.MustCompile(`(^|, *)tier=`)

// checkExtraLabels checks that fams hold n samples, each with the same labels besides
// its own, and some unless labels is empty.
func checkExtraLabels(t *testing.T, labels string, fams map[string]*dto.MetricFamily, own map[string]bool, n int) {
	t.Helper()
	var extra string
	got := 0
	for _, fam := range fams {
		for _, m := range fam.GetMetric() {
			got++
			var pairs []string
			for _, l := range m.GetLabel() {
				if !own[l.GetName()] {
					pairs = append(pairs, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
				}
			}
			s := strings.Join(pairs, ",")
			if got == 1 {
				extra = s
			} else if s != extra {
				t.Fatalf("labels %q: samples carry different extra labels, %s and %s", labels, extra, s)
			}
		}
	}
	if got != n {
		t.Fatalf("labels %q: %d samples pushed, %d gathered", labels, got, n)
	}
	if (extra == "") != (strings.TrimSpace(labels) == "") {
		t.Fatalf("labels %q pushed as extra labels %q", labels, extra)
	}
}

// fuzzReceiver keeps what was last pushed to it, parsed as the Prometheus text format.
type fuzzReceiver struct {
	mu     sync.Mutex
	pushed bool
	fams   map[string]*dto.MetricFamily
	err    error
}

func (p *fuzzReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		defer zr.Close()
		body = zr
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(body)
	p.mu.Lock()
	p.pushed, p.fams, p.err = true, fams, err
	p.mu.Unlock()
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (p *fuzzReceiver) reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pushed, p.fams, p.err = false, nil, nil
}

func (p *fuzzReceiver) last() (map[string]*dto.MetricFamily, bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.fams, p.pushed, p.err
}
