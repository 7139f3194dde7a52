package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

func fmtDur(d time.Duration) string {
	if d >= time.Second {
		return fmt.Sprintf("%.2f s", d.Seconds())
	}
	return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond))
}

// ge marks a percentile that is a lower bound.
func ge(censored bool) string {
	if censored {
		return "≥ "
	}
	return ""
}

func pct(x float64) string { return fmt.Sprintf("%.0f%%", 100*x) }

// reasons lists rejection reasons with their counts, most frequent first.
func reasons(m map[string]int) string {
	keys := slices.Collect(maps.Keys(m))
	slices.SortFunc(keys, func(a, b string) int { return cmp.Or(m[b]-m[a], strings.Compare(a, b)) })
	var parts []string
	for _, k := range keys {
		name := k
		if name == "" {
			name = "(no reason header)"
		}
		parts = append(parts, fmt.Sprintf("%s %d", name, m[k]))
	}
	if len(parts) == 0 {
		return "–"
	}
	return strings.Join(parts, ", ")
}

// tierTrace condenses one tier's working cap and state over the measurement window.
type tierTrace struct {
	Start, Min, Median, Max, End float64 // working in-flight cap
	MeanInFlight, MeanQueued     float64
	AtCap                        float64 // fraction of samples with in-flight >= the cap
	Saturated                    float64 // fraction of samples in which the engine counted as saturated
}

// trace condenses stack k's timeline over the window for the named tier; ok is false
// when the stack has no such tier.
func (e *experiment) trace(k int, tier string) (tierTrace, bool) {
	var tr tierTrace
	var caps []float64
	n := 0
	for _, s := range e.Timeline[k] {
		if s.At < e.Warmup || s.At >= e.Warmup+e.Window {
			continue
		}
		i := slices.IndexFunc(s.Tiers, func(t admStats) bool { return t.Name == tier })
		if i < 0 {
			return tr, false
		}
		t := s.Tiers[i]
		caps = append(caps, t.Limit)
		tr.MeanInFlight += float64(t.InFlight)
		q := 0
		for _, x := range t.Queued {
			q += x
		}
		tr.MeanQueued += float64(q)
		if float64(t.InFlight) >= float64(int(t.Limit)) {
			tr.AtCap++
		}
		if s.Engine != 0 {
			tr.Saturated++
		}
		n++
	}
	if n == 0 {
		return tr, false
	}
	tr.Start, tr.End = caps[0], caps[len(caps)-1]
	tr.MeanInFlight /= float64(n)
	tr.MeanQueued /= float64(n)
	tr.AtCap /= float64(n)
	tr.Saturated /= float64(n)
	slices.Sort(caps)
	tr.Min, tr.Median, tr.Max = caps[0], caps[len(caps)/2], caps[len(caps)-1]
	return tr, true
}

// engineLoad returns the simulated engine's mean running and waiting requests over the
// window.
func (e *experiment) engineLoad(k int) (running, waiting float64) {
	n := 0
	for _, s := range e.Timeline[k] {
		if s.At < e.Warmup || s.At >= e.Warmup+e.Window {
			continue
		}
		running += float64(s.Running)
		waiting += float64(s.Waiting)
		n++
	}
	if n == 0 {
		return 0, 0
	}
	return running / float64(n), waiting / float64(n)
}

// writeRaw writes an experiment's outcomes and timeline as JSON lines under dir.
func writeRaw(dir string, e *experiment) error {
	name := strings.NewReplacer(" ", "_", "×", "x", "/", "_").Replace(e.Name)
	f, err := os.Create(filepath.Join(dir, name+".jsonl"))
	if err != nil {
		return err
	}
	defer f.Close()
	enc := json.NewEncoder(f)
	for k, st := range e.Stacks {
		for _, o := range e.Outcomes[k] {
			if err := enc.Encode(map[string]any{"kind": "request", "stack": st.setup.Name, "class": e.Classes[o.Class].Name,
				"tenant": e.Classes[o.Class].Tenant, "arrival_s": o.Arrival.Seconds(), "status": o.Status, "reason": o.Reason,
				"headers_s": o.Headers.Seconds(), "ttft_s": o.TTFT.Seconds(), "e2e_s": o.E2E.Seconds(), "tokens": o.Tokens,
				"chunks": o.Chunks, "done": o.Done, "cut": o.Cut, "err": o.Err,
				"good": o.good(e.Classes[o.Class].Output, e.Classes[o.Class].SLO.Or(e.SLO))}); err != nil {
				return err
			}
		}
		for _, s := range e.Timeline[k] {
			if err := enc.Encode(map[string]any{"kind": "sample", "stack": st.setup.Name, "t_s": s.At.Seconds(),
				"running": s.Running, "waiting": s.Waiting, "kv_usage": s.KVUsage, "engine": s.Engine.String(), "tiers": s.Tiers,
				"tenants": s.Tenants}); err != nil {
				return err
			}
		}
	}
	return nil
}

// table writes a Markdown table.
func table(w io.Writer, head []string, rows [][]string) {
	fmt.Fprintf(w, "| %s |\n", strings.Join(head, " | "))
	fmt.Fprintf(w, "|%s\n", strings.Repeat("---|", len(head)))
	for _, r := range rows {
		fmt.Fprintf(w, "| %s |\n", strings.Join(r, " | "))
	}
	fmt.Fprintln(w)
}
