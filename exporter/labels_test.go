package exporter

import (
	"fmt"
	"sync"
	"testing"
)

// testLabel is the entry of a labelIndex under test: what create was called with.
type testLabel struct {
	label string
	n     int
}

// newTestIndex returns a labelIndex bounded to limit names besides "other", whose empty
// entry is empty, and the record of its create calls.
func newTestIndex(limit int, empty *testLabel) (*labelIndex[*testLabel], *[]testLabel) {
	var x labelIndex[*testLabel]
	var created []testLabel
	x.init(limit, "other", empty, func(label string, n int) *testLabel {
		created = append(created, testLabel{label, n})
		return &testLabel{label, n}
	})
	return &x, &created
}

func TestLabelIndex(t *testing.T) {
	empty := &testLabel{label: "none"}
	tests := []struct {
		name    string
		lookups []string
		want    []testLabel // the entry of each lookup
		created []testLabel // create's calls, in order
		table   int         // names remembered
	}{
		{"empty", []string{"", ""}, []testLabel{*empty, *empty}, nil, 0},
		{"once per name", []string{"a", "b", "a", "b"},
			[]testLabel{{"a", 1}, {"b", 2}, {"a", 1}, {"b", 2}},
			[]testLabel{{"a", 1}, {"b", 2}}, 2},
		{"overflow past the limit", []string{"a", "b", "c", "d", "c"},
			[]testLabel{{"a", 1}, {"b", 2}, {"other", 0}, {"other", 0}, {"other", 0}},
			[]testLabel{{"a", 1}, {"b", 2}, {"other", 0}}, 3},
		{"overflow name within the limit", []string{"other", "a", "b", "c"},
			[]testLabel{{"other", 0}, {"a", 1}, {"b", 2}, {"other", 0}},
			[]testLabel{{"other", 0}, {"a", 1}, {"b", 2}}, 3},
		{"overflow name past the limit", []string{"a", "b", "c", "other"},
			[]testLabel{{"a", 1}, {"b", 2}, {"other", 0}, {"other", 0}},
			[]testLabel{{"a", 1}, {"b", 2}, {"other", 0}}, 3},
		{"empty is no name", []string{"", "a", "", "b", "c"},
			[]testLabel{*empty, {"a", 1}, *empty, {"b", 2}, {"other", 0}},
			[]testLabel{{"a", 1}, {"b", 2}, {"other", 0}}, 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			x, created := newTestIndex(2, empty)
			var got []testLabel
			for _, name := range tc.lookups {
				got = append(got, *x.lookup(name))
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("lookups %q = %v, want %v", tc.lookups, got, tc.want)
			}
			if fmt.Sprint(*created) != fmt.Sprint(tc.created) {
				t.Errorf("created %v, want %v", *created, tc.created)
			}
			if n := len(*x.table.Load()); n != tc.table {
				t.Errorf("%d names remembered, want %d", n, tc.table)
			}
		})
	}
}

// TestLabelIndexConcurrent looks names up from several goroutines at once (run with
// -race): every name gets one entry, the same for all, and the limit holds.
func TestLabelIndexConcurrent(t *testing.T) {
	const limit, names, workers = 16, 40, 8
	x, created := newTestIndex(limit, nil)
	got := make([][names]*testLabel, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range names {
				got[w][(i+w)%names] = x.lookup(fmt.Sprint("name-", (i+w)%names))
			}
		})
	}
	wg.Wait()
	if len(*created) != limit+1 {
		t.Errorf("%d entries created, want %d", len(*created), limit+1)
	}
	own := 0
	for i := range names {
		e := got[0][i]
		for w := range workers {
			if got[w][i] != e {
				t.Fatalf("name-%d: goroutines got different entries %v and %v", i, *got[w][i], *e)
			}
		}
		if e.label != "other" {
			own++
			if e.label != fmt.Sprint("name-", i) {
				t.Errorf("name-%d labelled %q", i, e.label)
			}
		}
	}
	if own != limit {
		t.Errorf("%d names with a label value of their own, want %d", own, limit)
	}
}
