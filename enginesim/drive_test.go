package enginesim

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"
)

// drive plays arrivals at the given offsets, every request of prompt/output tokens,
// through a Virtual of cfg to the end, moving its time only to its own changes and the
// arrivals, and returns what finished and the IDs refused at arrival and on entry.
func drive(t *testing.T, cfg Config, prompt, output int, offsets []time.Duration) (fs []Finished, atArrival, onEntry []uint64) {
	fs, atArrival, onEntry, _ = driveFirst(t, cfg, prompt, output, offsets)
	return fs, atArrival, onEntry
}

// driveFirst is drive that also returns when each request's first token was reported.
func driveFirst(t *testing.T, cfg Config, prompt, output int, offsets []time.Duration) (fs []Finished, atArrival, onEntry []uint64, first map[uint64]time.Time) {
	t.Helper()
	v, err := NewVirtual(cfg, epoch)
	if err != nil {
		t.Fatal(err)
	}
	first = map[uint64]time.Time{}
	advance := func(at time.Time) {
		ev, err := v.Advance(at)
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range ev.First {
			if _, again := first[id]; again {
				t.Fatalf("request %d: a second first token at %v", id, at)
			}
			first[id] = at
		}
		fs, onEntry = append(fs, ev.Finished...), append(onEntry, ev.Refused...)
	}
	for _, off := range offsets {
		at := epoch.Add(off)
		for next, ok := v.Next(); ok && !next.After(at); next, ok = v.Next() {
			advance(next)
		}
		advance(at)
		id, ok, err := v.Arrive(prompt, output)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			atArrival = append(atArrival, id)
		}
	}
	for next, ok := v.Next(); ok; next, ok = v.Next() {
		advance(next)
	}
	return fs, atArrival, onEntry, first
}

// A Virtual driven from outside keeps the model's time as the harness of virtual.go does:
// the same arrivals give the same requests, finished at the same times, and it reports
// each request's first token as its time to first token says.
func TestVirtualMatchesOpenLoop(t *testing.T) {
	p := mustProfile(t, "h20x8-flash")
	offsets := poissonArrivals(1.5, 2*time.Minute, 7)
	want, _ := openLoop(p, 8192, 128, offsets)
	got, refusedA, refusedE, first := driveFirst(t, Config{Profile: p}, 8192, 128, offsets)
	for _, f := range got {
		if at, want := first[f.ID], epoch.Add(offsets[f.ID-1]+f.TTFT); !at.Equal(want) {
			t.Fatalf("request %d: first token reported at %v, its TTFT says %v", f.ID, at, want)
		}
	}
	if len(first) != len(got) {
		t.Errorf("%d first tokens reported for %d requests", len(first), len(got))
	}
	if len(refusedA)+len(refusedE) > 0 {
		t.Fatalf("refused %v %v without caps", refusedA, refusedE)
	}
	byID := func(a, b Finished) int { return int(a.ID) - int(b.ID) }
	slices.SortFunc(want, byID)
	slices.SortFunc(got, byID)
	if len(got) != len(offsets) || !slices.Equal(got, want) {
		t.Fatalf("%d finished, want %d; first difference:\n%s", len(got), len(want), firstDiff(got, want))
	}
}

func firstDiff(a, b []Finished) string {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return "got  " + fmtFinished(a[i]) + "\nwant " + fmtFinished(b[i])
		}
	}
	return "a list is shorter"
}

func fmtFinished(f Finished) string {
	return fmt.Sprintf("request %d: TTFT %v, E2E %v", f.ID, f.TTFT, f.E2E)
}

// The engines' caps refuse in a Virtual where and as the HTTP server does (caps.go):
// vLLM's --max-num-queued-reqs on arrival, counting the requests in the scheduler;
// SGLang's --max-queued-requests as a request enters the scheduler, against its waiting
// queue. A refused request never runs.
func TestVirtualCaps(t *testing.T) {
	frozen := frozenProfile(t) // no API latency: a request enters the scheduler as it arrives
	slowAPI := frozen
	slowAPI.APILatency = time.Second
	burst := []time.Duration{0, 0, 0, 0, 0} // five at once, on an engine that runs one at a time for an hour
	tests := []struct {
		name          string
		cfg           Config
		arrival, entr []uint64
	}{
		{"none", Config{Profile: frozen}, nil, nil},
		// The first two are in the scheduler when the third arrives.
		{"vllm max-num-queued-reqs 2", Config{Profile: frozen, MaxNumQueuedReqs: 2}, []uint64{3, 4, 5}, nil},
		// With an API latency all five are in the API server when the last arrives:
		// vLLM's check on arrival sees none of them; its second check, on entry, refuses
		// every one past the cap.
		{"vllm max-num-queued-reqs 2, API latency", Config{Profile: slowAPI, MaxNumQueuedReqs: 2}, nil, []uint64{3, 4, 5}},
		// One runs, so two may wait.
		{"sglang max-queued-requests 2", Config{Profile: frozen, Flavor: FlavorSGLang, MaxQueuedRequests: 2}, nil, []uint64{4, 5}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fs, arrival, entry := drive(t, tc.cfg, 8, 1, burst)
			if !slices.Equal(arrival, tc.arrival) || !slices.Equal(entry, tc.entr) {
				t.Errorf("refused on arrival %v and on entry %v, want %v and %v", arrival, entry, tc.arrival, tc.entr)
			}
			if want := len(burst) - len(tc.arrival) - len(tc.entr); len(fs) != want {
				t.Errorf("%d finished, want %d", len(fs), want)
			}
		})
	}

}

// A Virtual refuses what it cannot do: a shape the profile cannot hold, time moved past
// the engine's next change or backwards, caps of the other flavour.
func TestVirtualErrors(t *testing.T) {
	p := mustProfile(t, "tiny")
	if _, err := NewVirtual(Config{Profile: p, MaxQueuedRequests: 1}, epoch); !errors.Is(err, errCaps) {
		t.Errorf("an SGLang cap on a vLLM engine: %v", err)
	}
	v, err := NewVirtual(Config{Profile: p}, epoch)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := v.Arrive(p.MaxModelLen, 1); err == nil {
		t.Error("a prompt as long as the context accepted")
	}
	if _, _, err := v.Arrive(16, 4); err != nil {
		t.Fatal(err)
	}
	next, ok := v.Next()
	if !ok || !next.Equal(epoch.Add(p.APILatency)) {
		t.Fatalf("next change %v %v, want the request's entry at %v", next, ok, epoch.Add(p.APILatency))
	}
	if _, err := v.Advance(next.Add(time.Nanosecond)); err == nil {
		t.Error("advanced past the next change")
	}
	if _, err := v.Advance(epoch.Add(-time.Second)); err == nil {
		t.Error("advanced backwards")
	}
	if _, err := OfferClosed(p, 16, 4, 0, time.Second); err == nil {
		t.Error("OfferClosed with no clients")
	}
}

// One client at a time in a closed loop: each request has the engine to itself, so
// every one completes with the TTFT of a request alone on an idle engine, and the loop
// completes one after another for the whole window.
func TestOfferClosedAlone(t *testing.T) {
	p := mustProfile(t, "h20x8-flash")
	l, err := OfferClosed(p, 8192, 1, 1, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	alone, _ := openLoop(p, 8192, 1, []time.Duration{0})
	if len(alone) != 1 {
		t.Fatalf("a request alone: %d finished", len(alone))
	}
	if l.Completed < 2 || l.Sent != l.Completed || l.TTFTp50 != alone[0].TTFT || l.TTFTp95 != alone[0].TTFT {
		t.Errorf("closed loop of one: %+v; want every request at the lone request's TTFT %v", l, alone[0].TTFT)
	}
	if want := float64(l.Completed) / time.Minute.Seconds(); l.Rate != want {
		t.Errorf("rate %v, want the %d completions over the minute, %v", l.Rate, l.Completed, want)
	}
}
