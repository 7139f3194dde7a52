package main

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"testing"
	"time"
)

// A small client of Prometheus' HTTP API for the end-to-end test.

// promSample is one sample of an instant query's result.
type promSample struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"` // [time, "value"]
}

func (s promSample) value() float64 {
	str, _ := s.Value[1].(string)
	v, err := strconv.ParseFloat(str, 64)
	if err != nil {
		return math.NaN()
	}
	return v
}

// promQuery evaluates expr now; a scalar result is one sample.
func promQuery(base, expr string) ([]promSample, error) {
	var data struct {
		ResultType string          `json:"resultType"`
		Result     json.RawMessage `json:"result"`
	}
	if err := promGet(base+"/api/v1/query?"+url.Values{"query": {expr}}.Encode(), &data); err != nil {
		return nil, err
	}
	var out []promSample
	switch data.ResultType {
	case "vector":
		return out, json.Unmarshal(data.Result, &out)
	case "scalar":
		out = append(out, promSample{})
		return out, json.Unmarshal(data.Result, &out[0].Value)
	}
	return nil, fmt.Errorf("result type %q, want a vector or a scalar", data.ResultType)
}

// promGet reads a Prometheus API response into data, or returns its error.
func promGet(u string, data any) error {
	resp, err := http.Get(u)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var body struct {
		Status    string          `json:"status"`
		ErrorType string          `json:"errorType"`
		Error     string          `json:"error"`
		Data      json.RawMessage `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return fmt.Errorf("GET %s: %d, %v", u, resp.StatusCode, err)
	}
	if body.Status != "success" {
		return fmt.Errorf("%s: %s", body.ErrorType, body.Error)
	}
	return json.Unmarshal(body.Data, data)
}

// promAlert is an active alert as /api/v1/alerts lists it.
type promAlert struct {
	Labels map[string]string `json:"labels"`
	State  string            `json:"state"`
}

// burnAlerts returns the active SlogateTTFTBudgetBurn alerts of a namespace.
func burnAlerts(base, namespace string) ([]promAlert, error) {
	var data struct {
		Alerts []promAlert `json:"alerts"`
	}
	err := promGet(base+"/api/v1/alerts", &data)
	return slices.DeleteFunc(data.Alerts, func(a promAlert) bool {
		return a.Labels["alertname"] != "SlogateTTFTBudgetBurn" || a.Labels["namespace"] != namespace
	}), err
}

// groupEvaluated returns when Prometheus last evaluated the rule group.
func groupEvaluated(base, group string) (time.Time, error) {
	var data struct {
		Groups []struct {
			Name           string    `json:"name"`
			LastEvaluation time.Time `json:"lastEvaluation"`
		} `json:"groups"`
	}
	if err := promGet(base+"/api/v1/rules", &data); err != nil {
		return time.Time{}, err
	}
	for _, g := range data.Groups {
		if g.Name == group {
			return g.LastEvaluation, nil
		}
	}
	return time.Time{}, fmt.Errorf("no rule group %s", group)
}

// awaitProm polls cond until it holds, failing the test after patience with cond's
// last error.
func awaitProm(t *testing.T, what string, patience time.Duration, cond func() (bool, error)) {
	t.Helper()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(patience)
	for {
		ok, err := cond()
		if ok {
			return
		}
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("timed out after %s waiting for %s: %v", patience, what, err)
		}
	}
}
