package main

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// FuzzParseTargets feeds arbitrary -targets and -pids lists to parseTargets. What it
// accepts is a baseline and at least one other target, with distinct non-empty names,
// non-empty URLs and positive pids; written back, the lists parse to the same targets.
func FuzzParseTargets(f *testing.F) {
	for _, c := range [][2]string{
		{"direct=http://127.0.0.1:8000,slogate=http://127.0.0.1:8080,nginx=http://127.0.0.1:8081", "slogate=123,nginx=45+46"},
		{"a=u,b=v", ""}, {"a=u", ""}, {"a=u,a=v", ""}, {"a=u,b=v", "c=1"}, {"a=u,b=v", "a=1+x"}, {"a=u,b=v", "a=0"},
		{" a = u , b=v ", " a =1"}, {"a=u=v,b=w", "a=1,a=2"}, {"=u,b=v", ""}, {"a=,b=v", ""}, {"a=u,b=v", "a="},
	} {
		f.Add(c[0], c[1])
	}
	f.Fuzz(func(t *testing.T, targets, pids string) {
		ts, err := parseTargets(targets, pids)
		if err != nil {
			if err.Error() == "" || ts != nil {
				t.Fatalf("parseTargets(%q, %q) = %v, %q", targets, pids, ts, err)
			}
			return
		}
		if len(ts) < 2 {
			t.Fatalf("parseTargets(%q, %q) gives %d targets", targets, pids, len(ts))
		}
		for i, tg := range ts {
			if tg.name == "" || tg.url == "" || slices.ContainsFunc(ts[:i], func(o target) bool { return o.name == tg.name }) {
				t.Fatalf("parseTargets(%q, %q) gives target %+v", targets, pids, tg)
			}
			for _, p := range tg.pids {
				if p <= 0 {
					t.Fatalf("parseTargets(%q, %q) gives pid %d", targets, pids, p)
				}
			}
		}
		wt, wp := formatTargets(ts)
		again, err := parseTargets(wt, wp)
		if err != nil || !reflect.DeepEqual(again, ts) {
			t.Fatalf("parseTargets(%q, %q) = %+v; written back as %q, %q: %+v, %v", targets, pids, ts, wt, wp, again, err)
		}
	})
}

// formatTargets writes targets back as -targets and -pids.
func formatTargets(ts []target) (targets, pids string) {
	var tl, pl []string
	for _, t := range ts {
		tl = append(tl, t.name+"="+t.url)
		if len(t.pids) == 0 {
			continue
		}
		var ps []string
		for _, p := range t.pids {
			ps = append(ps, strconv.Itoa(p))
		}
		pl = append(pl, fmt.Sprintf("%s=%s", t.name, strings.Join(ps, "+")))
	}
	return strings.Join(tl, ","), strings.Join(pl, ",")
}
