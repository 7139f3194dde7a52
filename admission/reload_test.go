package admission

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"
)

func TestReloadClampsLimit(t *testing.T) {
	tests := []struct {
		name     string
		limit    float64 // the working cap before the reload
		min, max int
		want     float64
	}{
		{name: "inside the new bounds: kept", limit: 3, min: 1, max: 8, want: 3},
		{name: "above the new max", limit: 6, min: 1, max: 4, want: 4},
		{name: "below the new min", limit: 2, min: 3, max: 8, want: 3},
		{name: "min defaults to 1", limit: 0.5, min: 0, max: 8, want: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, Enforce, tierConfig(func(tc *TierConfig) { tc.MaxInFlight = 8 }))
			h.c.mu.Lock()
			h.c.tiers[0].limit = tt.limit
			h.c.mu.Unlock()
			if err := h.c.Reload(tierConfig(func(tc *TierConfig) { tc.MinInFlight, tc.MaxInFlight = tt.min, tt.max })); err != nil {
				t.Fatal(err)
			}
			if st := h.only(); st.Limit != tt.want || st.MaxInFlight != tt.max {
				t.Fatalf("limit %v (max %d), want %v", st.Limit, st.MaxInFlight, tt.want)
			}
		})
	}
}

func TestReloadKeepsLiveState(t *testing.T) {
	h := newHarness(t, Enforce, tierConfig(func(tc *TierConfig) { tc.MaxInFlight = 4 }))
	var tks []*Ticket
	for range 3 {
		tks = append(tks, h.admitNow(req(1)))
	}
	if err := h.c.Reload(tierConfig(func(tc *TierConfig) { tc.MaxInFlight = 2 })); err != nil {
		t.Fatal(err)
	}
	if st := h.only(); st.InFlight != 3 || st.Limit != 2 {
		t.Fatalf("stats %+v, want the 3 in flight kept and limit 2", st)
	}
	p := h.admitAsync(req(1), 1) // 3 in flight over a cap of 2
	tks[0].Done(ok)
	if got := h.only().Queued[Interactive]; got != 1 {
		t.Fatalf("granted at 2 in flight under a cap of 2")
	}
	tks[1].Done(ok)
	tks = append(tks[2:], h.granted(p))
	for _, tk := range tks {
		tk.Done(ok)
	}
	if st := h.only(); st.InFlight != 0 {
		t.Fatalf("in flight %d", st.InFlight)
	}
}

func TestReloadAddsTiers(t *testing.T) {
	h := newHarness(t, Enforce, tierConfig(func(tc *TierConfig) { tc.Name = "a" }))
	two := Config{Tiers: []TierConfig{{Name: "a", MaxInputTokens: 100, MaxInFlight: 1}, {Name: "b", MaxInFlight: 3}}}
	if err := h.c.Reload(two); err != nil {
		t.Fatal(err)
	}
	st := h.c.Stats()
	if len(st.Tiers) != 2 || st.Tiers[0].Name != "a" || st.Tiers[1].Name != "b" || st.Tiers[1].Limit != 3 {
		t.Fatalf("tiers %+v", st.Tiers)
	}
	tk := h.admitNow(req(1000))
	defer tk.Done(ok)
	if tk.Tier() != "b" {
		t.Fatalf("tier %q, want b", tk.Tier())
	}
}

func TestReloadRetiresRemovedTiers(t *testing.T) {
	only := func(name string) Config { return tierConfig(func(tc *TierConfig) { tc.Name = name }) }
	retired := func(c *Controller) int {
		c.mu.Lock()
		defer c.mu.Unlock()
		return len(c.retired)
	}
	t.Run("requests finish under the old tier", func(t *testing.T) {
		h := newHarness(t, Enforce, only("old"))
		a := h.admitNow(req(1))
		p := h.admitAsync(req(1), 1)
		if err := h.c.Reload(only("new")); err != nil {
			t.Fatal(err)
		}
		if st := h.c.Stats(); len(st.Tiers) != 1 || st.Tiers[0].Name != "new" || st.Tiers[0].InFlight != 0 {
			t.Fatalf("tiers %+v", st.Tiers)
		}
		n := h.admitNow(req(1)) // the new tier has its own slot
		if n.Tier() != "new" {
			t.Fatalf("tier %q", n.Tier())
		}
		a.Done(ok) // frees the old tier's slot for its waiter
		b := h.granted(p)
		if b.Tier() != "old" {
			t.Fatalf("waiter granted in %q", b.Tier())
		}
		h.c.Tick()
		if retired(h.c) != 1 {
			t.Fatal("a retired tier with a request in flight was dropped")
		}
		b.Done(ok)
		n.Done(ok)
		h.c.Tick()
		if retired(h.c) != 0 {
			t.Fatal("an idle retired tier is kept")
		}
	})
	t.Run("waiters of a retired tier time out", func(t *testing.T) {
		h := newHarness(t, Enforce, only("old"))
		a := h.admitNow(req(1))
		p := h.admitAsync(req(1), 1)
		if err := h.c.Reload(only("new")); err != nil {
			t.Fatal(err)
		}
		h.clock.Step(2 * time.Second)
		h.c.Tick()
		if rej := h.refused(p, QueueTimeout); rej.Tier != "old" {
			t.Fatalf("rejected in %q", rej.Tier)
		}
		a.Done(ok)
		h.c.Tick()
		if retired(h.c) != 0 {
			t.Fatal("an idle retired tier is kept")
		}
	})
	t.Run("a tier with requests in flight only", func(t *testing.T) {
		h := newHarness(t, Enforce, only("old"))
		a := h.admitNow(req(1))
		if err := h.c.Reload(only("new")); err != nil {
			t.Fatal(err)
		}
		if retired(h.c) != 1 {
			t.Fatal("a removed tier with a request in flight was not retired")
		}
		a.Done(ok)
		h.c.Tick()
		if retired(h.c) != 0 {
			t.Fatal("an idle retired tier is kept")
		}
	})
	t.Run("idle removed tiers are not kept", func(t *testing.T) {
		h := newHarness(t, Enforce, only("old"))
		if err := h.c.Reload(only("new")); err != nil {
			t.Fatal(err)
		}
		if retired(h.c) != 0 {
			t.Fatal("an idle removed tier was retired")
		}
	})
}

func TestReloadInvalidKeepsOld(t *testing.T) {
	h := newHarness(t, Enforce, tierConfig(func(tc *TierConfig) { tc.MaxInFlight = 3 }))
	before := h.c.Stats()
	for _, bad := range []Config{{}, tierConfig(func(tc *TierConfig) { tc.MaxInFlight = 0 })} {
		if err := h.c.Reload(bad); !errors.Is(err, ErrInvalidConfig) {
			t.Fatalf("Reload = %v, want ErrInvalidConfig", err)
		}
	}
	if after := h.c.Stats(); after.Tiers[0] != before.Tiers[0] || len(after.Tiers) != 1 {
		t.Fatalf("stats changed: %+v -> %+v", before.Tiers, after.Tiers)
	}
}

// The token bucket keeps its tokens across a reload, at the controller's clock.
func TestReloadKeepsBucket(t *testing.T) {
	rated := func(r float64) Config {
		return tierConfig(func(tc *TierConfig) { tc.Rate, tc.Burst, tc.MaxInFlight = r, 1, 9 })
	}
	h := newHarness(t, Enforce, rated(1))
	defer h.admitNow(req(1)).Done(ok)
	if err := h.c.Reload(rated(1)); err != nil {
		t.Fatal(err)
	}
	if rej := h.rejectNow(req(1), TierRate); rej.RetryAfter != time.Second {
		t.Fatalf("RetryAfter %v, want 1s", rej.RetryAfter)
	}
	if err := h.c.Reload(rated(4)); err != nil {
		t.Fatal(err)
	}
	if rej := h.rejectNow(req(1), TierRate); rej.RetryAfter != 250*time.Millisecond {
		t.Fatalf("RetryAfter %v at the new rate, want 250ms", rej.RetryAfter)
	}
	h.clock.Step(250 * time.Millisecond)
	defer h.admitNow(req(1)).Done(ok)
}

func writeTiers(t *testing.T, path, content string, mtime time.Time) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(path, mtime, mtime); err != nil {
		t.Fatal(err)
	}
}

func tiersYAML(cap string) string { return "tiers:\n- name: t\n  max_in_flight: " + cap + "\n" }

func TestReloader(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tiers.yaml")
	t1 := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	writeTiers(t, path, tiersYAML("2"), t1)
	cfg, err := LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, Enforce, cfg)
	r := NewReloader(path, h.c)
	capOf := func() int { return h.only().MaxInFlight }
	wantStatus := func(ok bool, at time.Time) {
		t.Helper()
		if s := r.Status(); s.OK != ok || !s.At.Equal(at) || (s.Err == nil) != ok {
			t.Fatalf("status %+v, want ok=%v at %v", s, ok, at)
		}
	}
	wantStatus(true, epoch)

	// An explicit reload (SIGHUP, POST /-/reload), good and bad.
	h.clock.Step(time.Second)
	writeTiers(t, path, tiersYAML("3"), t1.Add(time.Second))
	if err := r.Reload(); err != nil || capOf() != 3 {
		t.Fatalf("Reload = %v, cap %d; want nil, 3", err, capOf())
	}
	wantStatus(true, h.clock.Now())
	h.clock.Step(time.Second)
	writeTiers(t, path, "tiers: [{name: t, max_in_flight: 0}]\n", t1.Add(2*time.Second))
	if err := r.Reload(); !errors.Is(err, ErrInvalidConfig) || capOf() != 3 {
		t.Fatalf("Reload = %v, cap %d; want ErrInvalidConfig, 3 kept", err, capOf())
	}
	wantStatus(false, h.clock.Now())

	// Watch's rounds: a change of modification time reloads, nothing else does.
	h.clock.Step(time.Second)
	writeTiers(t, path, tiersYAML("4"), t1.Add(3*time.Second))
	r.check()
	wantStatus(true, h.clock.Now())
	if capOf() != 4 {
		t.Fatalf("cap %d after a change, want 4", capOf())
	}
	last := h.clock.Now()
	h.clock.Step(time.Second)
	r.check()
	wantStatus(true, last) // unchanged file: no reload

	h.clock.Step(time.Second)
	writeTiers(t, path, "tiers: [", t1.Add(4*time.Second))
	r.check()
	wantStatus(false, h.clock.Now())
	last = h.clock.Now()
	h.clock.Step(time.Second)
	r.check() // the same broken file is not parsed again
	wantStatus(false, last)

	// A missing file is a failure, recorded once; its return is a change.
	writeTiers(t, path, tiersYAML("5"), t1.Add(5*time.Second))
	r.check()
	if capOf() != 5 {
		t.Fatalf("cap %d, want 5", capOf())
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	h.clock.Step(time.Second)
	r.check()
	wantStatus(false, h.clock.Now())
	if !errors.Is(r.Status().Err, os.ErrNotExist) {
		t.Fatalf("err %v, want not-exist", r.Status().Err)
	}
	last = h.clock.Now()
	h.clock.Step(time.Second)
	r.check()
	wantStatus(false, last)
	h.clock.Step(time.Second)
	writeTiers(t, path, tiersYAML("6"), t1.Add(5*time.Second)) // back, with its old time
	r.check()
	wantStatus(true, h.clock.Now())
	if capOf() != 6 {
		t.Fatalf("cap %d, want 6", capOf())
	}

	// An explicit reload of a missing file fails too.
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := r.Reload(); !errors.Is(err, ErrInvalidConfig) || r.Status().OK || capOf() != 6 {
		t.Fatalf("Reload of a missing file = %v, status %+v", err, r.Status())
	}
}

func TestReloaderMissingAtStart(t *testing.T) {
	h := newHarness(t, Enforce, tierConfig())
	path := filepath.Join(t.TempDir(), "later.yaml")
	r := NewReloader(path, h.c)
	r.check()
	if r.Status().OK {
		t.Fatal("a missing file counts as loaded")
	}
	writeTiers(t, path, tiersYAML("7"), time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC))
	r.check()
	if !r.Status().OK || h.only().MaxInFlight != 7 {
		t.Fatalf("status %+v, cap %d", r.Status(), h.only().MaxInFlight)
	}
}

// Watch looks at the file at each tick of the controller's clock, not between two, and
// returns when its ctx ends.
func TestWatchTicksOnItsClock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tiers.yaml")
	t1 := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	writeTiers(t, path, tiersYAML("2"), t1)
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Enforce, tierConfig())
		r := NewReloader(path, h.c)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { r.Watch(ctx, time.Minute); close(done) }()
		t.Cleanup(func() { cancel(); <-done }) // also when the test fails
		synctest.Wait()                        // Watch waits on its ticker
		writeTiers(t, path, tiersYAML("3"), t1.Add(time.Second))
		h.clock.Step(time.Minute - time.Nanosecond)
		synctest.Wait()
		if h.only().MaxInFlight != 1 {
			t.Fatalf("cap %d before the first tick, want 1", h.only().MaxInFlight)
		}
		h.clock.Step(time.Nanosecond)
		synctest.Wait()
		if h.only().MaxInFlight != 3 || !r.Status().OK || !r.Status().At.Equal(h.clock.Now()) {
			t.Fatalf("at the tick: cap %d, status %+v; want 3, reloaded now", h.only().MaxInFlight, r.Status())
		}
	})
}
