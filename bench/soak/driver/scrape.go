package main

import (
	"context"
	"fmt"
	"net/http"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// reading is what one scrape of slogate's /metrics says.
type reading struct {
	goroutines, fds, heapInuse, rss, heapGoal float64
	requests                                  float64            // slogate_requests_total, summed
	byOutcome                                 map[string]float64 // slogate_requests_total by outcome
	byCode                                    map[string]float64 // slogate_requests_total by code
}

// scrape reads url, slogate's /metrics, within 5 seconds.
func scrape(ctx context.Context, url string) (reading, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return reading{}, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return reading{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return reading{}, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		return reading{}, err
	}
	r := reading{
		goroutines: single(fams, "go_goroutines"), fds: single(fams, "process_open_fds"),
		heapInuse: single(fams, "go_memstats_heap_inuse_bytes"), rss: single(fams, "process_resident_memory_bytes"),
		heapGoal:  single(fams, "go_memstats_next_gc_bytes"),
		byOutcome: make(map[string]float64), byCode: make(map[string]float64),
	}
	if f := fams["slogate_requests_total"]; f != nil {
		for _, m := range f.GetMetric() {
			v := m.GetCounter().GetValue()
			r.requests += v
			r.byOutcome[label(m, "outcome")] += v
			r.byCode[label(m, "code")] += v
		}
	}
	return r, nil
}

// single returns the value of a family's only gauge or counter; -1 when it is missing.
func single(fams map[string]*dto.MetricFamily, name string) float64 {
	f := fams[name]
	if f == nil || len(f.GetMetric()) == 0 {
		return -1
	}
	m := f.GetMetric()[0]
	if g := m.GetGauge(); g != nil {
		return g.GetValue()
	}
	return m.GetCounter().GetValue()
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}
