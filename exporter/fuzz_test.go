package exporter

import (
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"unicode"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// FuzzParseDCGM feeds arbitrary --dcgm settings to the DCGM setting parser. ValidateDCGM
// and parseDCGM agree; a refused setting gets a message that quotes it; an accepted one
// is one of the documented forms — off, embedded, a connection string with an address,
// or host:port with a host and a port in 1-65535 — and holds no space or control
// character, which no host name, address or socket path that could be reached has.
func FuzzParseDCGM(f *testing.F) {
	for _, s := range []string{
		DCGMOff, DCGMEmbedded, "localhost:5555", "10.0.0.7:5555", "[::1]:5555", "tcp://10.0.0.7:5555",
		"unix:///run/nvidia/dcgm.sock", "vsock://3:5555", "", "Embedded", "localhost", ":5555", "localhost:0",
		"localhost:65536", "localhost:http", "tcp://", "http://localhost:5555", " localhost:5555", "host\x00:5555",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, setting string) {
		verr := ValidateDCGM(setting)
		if setting == DCGMOff {
			if verr != nil {
				t.Fatalf("ValidateDCGM(%q) = %v", setting, verr)
			}
			return
		}
		tg, err := parseDCGM(setting)
		if (err == nil) != (verr == nil) {
			t.Fatalf("parseDCGM(%q) = %v but ValidateDCGM says %v", setting, err, verr)
		}
		if err != nil {
			if !strings.Contains(err.Error(), strconv.Quote(setting)) || tg != (dcgmTarget{}) {
				t.Fatalf("parseDCGM(%q) = %+v, %q: want the zero target and a message quoting the setting", setting, tg, err)
			}
			return
		}
		if i := strings.IndexFunc(setting, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }); i >= 0 {
			t.Fatalf("parseDCGM accepted %q, with %q at %d", setting, setting[i:i+1], i)
		}
		if tg.embedded {
			if setting != DCGMEmbedded || tg.addr != "" {
				t.Fatalf("parseDCGM(%q) = %+v", setting, tg)
			}
			return
		}
		if tg.addr != setting {
			t.Fatalf("parseDCGM(%q) dials %q", setting, tg.addr)
		}
		if scheme, rest, ok := strings.Cut(setting, "://"); ok && (scheme == "tcp" || scheme == "unix" || scheme == "vsock") {
			if rest == "" {
				t.Fatalf("parseDCGM(%q): a connection string without an address", setting)
			}
			return
		}
		host, port, err := net.SplitHostPort(setting)
		n, perr := strconv.Atoi(port)
		if err != nil || host == "" || perr != nil || n < 1 || n > 65535 {
			t.Fatalf("parseDCGM accepted %q: host %q, port %q (%v)", setting, host, port, err)
		}
	})
}

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
