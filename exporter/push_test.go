package exporter

import (
	"compress/gzip"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// pushReceiver is an HTTP endpoint that parses what is pushed to it.
type pushReceiver struct {
	pushes chan map[string]*dto.MetricFamily
	errs   chan error
}

func (p *pushReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			p.report(err)
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		defer zr.Close()
		body = zr
	}
	if r.Method != http.MethodPost {
		p.report(errors.New("push with method " + r.Method))
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(body)
	if err != nil {
		p.report(err)
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	select {
	case p.pushes <- fams:
	default: // the test has what it needs
	}
	w.WriteHeader(http.StatusNoContent)
}

func (p *pushReceiver) report(err error) {
	select {
	case p.errs <- err:
	default:
	}
}

func TestPush(t *testing.T) {
	_, reg := fullRegistry(t, true)
	recv := &pushReceiver{pushes: make(chan map[string]*dto.MetricFamily, 1), errs: make(chan error, 1)}
	srv := httptest.NewServer(recv)
	defer srv.Close()

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Push(ctx, srv.URL+"/api/v1/import/prometheus", 10*time.Millisecond, reg, `pod="slogate-0",namespace="llm"`, nil)
	}()

	var fams map[string]*dto.MetricFamily
	select {
	case fams = <-recv.pushes:
	case err := <-recv.errs:
		t.Fatalf("the receiver rejected a push: %v", err)
	case err := <-done:
		t.Fatalf("Push returned before pushing: %v", err)
	case <-time.After(30 * time.Second): // a deadlock guard, not a timing assertion
		t.Fatal("nothing was pushed")
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Push returned %v after its context ended, want nil", err)
	}

	f, ok := fams["slogate_requests_total"]
	if !ok || len(f.GetMetric()) == 0 {
		t.Fatalf("slogate_requests_total not pushed; got %d families", len(fams))
	}
	ls := labelString(f.GetMetric()[0])
	for _, want := range []string{`pod="slogate-0"`, `namespace="llm"`, `model="llama"`} {
		if !strings.Contains(ls, want) {
			t.Errorf("pushed labels %s lack %s", ls, want)
		}
	}
	if h, ok := fams["slogate_time_to_first_token_seconds"]; !ok || len(h.GetMetric()[0].GetHistogram().GetBucket()) == 0 {
		t.Error("the TTFT histogram was not pushed with its classic buckets")
	}
}

func TestPushInvalid(t *testing.T) {
	reg := prometheus.NewRegistry()
	tests := []struct {
		name     string
		url      string
		interval time.Duration
		g        prometheus.Gatherer
		labels   string
	}{
		{"not http", "ftp://example.com/push", time.Second, reg, ""},
		{"no host", "http:///push", time.Second, reg, ""},
		{"unparsable", "http://[::1", time.Second, reg, ""},
		{"zero interval", "http://127.0.0.1:1/push", 0, reg, ""},
		{"nil gatherer", "http://127.0.0.1:1/push", time.Second, nil, ""},
		{"bad extra labels", "http://127.0.0.1:1/push", time.Second, reg, "pod=unquoted"},
		{"password kept out of errors", "gopher://user:hunter2@example.com/", time.Second, reg, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := Push(context.Background(), tc.url, tc.interval, tc.g, tc.labels, nil)
			if !errors.Is(err, ErrInvalidPush) {
				t.Fatalf("Push: err = %v, want ErrInvalidPush", err)
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Errorf("the error shows the password: %v", err)
			}
		})
	}
}
