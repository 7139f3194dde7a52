package main

import (
	"bytes"
	"encoding/json"
	"math"
	"testing"
	"time"

	"github.com/slogate/slogate/wire"
)

func TestPoissonScalesWithRate(t *testing.T) {
	a := poisson(1, time.Hour, 7)
	b := poisson(2, 30*time.Minute, 7)
	if len(a) != len(b) {
		t.Fatalf("same seed at twice the rate over half the time: %d and %d arrivals", len(a), len(b))
	}
	for i := range a {
		if d := a[i] - 2*b[i]; d < -time.Microsecond || d > time.Microsecond {
			t.Fatalf("arrival %d: %v at rate 1, %v at rate 2", i, a[i], b[i])
		}
	}
}

func TestPoissonRate(t *testing.T) {
	for _, rate := range []float64{0.5, 2} {
		n := len(poisson(rate, 10000*time.Second, 1))
		want := rate * 10000
		if math.Abs(float64(n)-want) > 4*math.Sqrt(want) {
			t.Errorf("rate %g: %d arrivals in 10000 s, want about %.0f", rate, n, want)
		}
	}
	if got := poisson(0, time.Hour, 1); got != nil {
		t.Errorf("rate 0: %d arrivals", len(got))
	}
}

// TestRenewalBursty checks the bursty arrivals' rate and coefficient of variation, and
// that they too scale in time with the rate.
func TestRenewalBursty(t *testing.T) {
	for _, cv := range []float64{0.5, 1, 3} {
		at := renewal(2, 20000*time.Second, 5, cv)
		var sum, sq float64
		prev := time.Duration(0)
		for _, a := range at {
			g := (a - prev).Seconds()
			sum, sq, prev = sum+g, sq+g*g, a
		}
		n := float64(len(at))
		mean := sum / n
		got := math.Sqrt(sq/n-mean*mean) / mean
		// The sample CV of n gamma gaps with CV 3 has a standard error of about
		// cv·sqrt((κ−1)/4n) with kurtosis κ = 3+6cv²: under 0.05 here.
		if math.Abs(mean-0.5) > 0.5*4*cv/math.Sqrt(n) || math.Abs(got-cv) > 0.1*cv {
			t.Errorf("cv %g: %d arrivals, mean gap %.4f s (want 0.5), cv %.3f", cv, len(at), mean, got)
		}
		fast := renewal(4, 10000*time.Second, 5, cv)
		if len(fast) != len(at) || len(at) > 0 && (at[len(at)/2]-2*fast[len(at)/2]).Abs() > time.Microsecond {
			t.Errorf("cv %g: twice the rate should give the same arrivals at half the times", cv)
		}
	}
	if got, want := renewal(1, time.Hour, 7, 1), poisson(1, time.Hour, 7); len(got) != len(want) || got[0] != want[0] {
		t.Error("cv 1 should be the Poisson process")
	}
}

func TestScheduleMergesClassesInOrder(t *testing.T) {
	classes := []class{{Name: "a", Rate: 1}, {Name: "b", Rate: 0.5}}
	s := schedule(classes, 10*time.Minute, 3, 1)
	count := [2]int{}
	for i, a := range s {
		count[a.Class]++
		if i > 0 && a.At < s[i-1].At {
			t.Fatalf("arrival %d at %v before %v", i, a.At, s[i-1].At)
		}
		if a.At >= 10*time.Minute {
			t.Fatalf("arrival at %v past the end", a.At)
		}
	}
	if count[0] != len(poisson(1, 10*time.Minute, 3)) || count[1] != len(poisson(0.5, 10*time.Minute, 4)) {
		t.Errorf("counts %v: each class should draw its own arrivals", count)
	}
}

func TestCompletionBody(t *testing.T) {
	body := completionBody("m", 8192, 128, 152064, 9)
	req, err := wire.Inspect(wire.RouteCompletions, body)
	if err != nil {
		t.Fatal(err)
	}
	if req.Prompt.TokenIDs != 8192 || req.Prompt.TextBytes != 0 || req.MaxTokens != 128 || !req.Stream || !req.IncludeUsage || !req.IgnoreEOS {
		t.Errorf("inspected %+v", req)
	}
	var v struct {
		Prompt []int `json:"prompt"`
	}
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatal(err)
	}
	for _, id := range v.Prompt {
		if id < 0 || id >= 152064 {
			t.Fatalf("token id %d outside the vocabulary", id)
		}
	}
	if !bytes.Equal(body, completionBody("m", 8192, 128, 152064, 9)) || bytes.Equal(body, completionBody("m", 8192, 128, 152064, 10)) {
		t.Error("the body should depend on the seed, and only on it")
	}
}
