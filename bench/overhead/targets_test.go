package main

import (
	"os"
	"slices"
	"testing"
)

func TestParseTargets(t *testing.T) {
	tests := []struct {
		name, targets, pids string
		want                []target
		wantErr             bool
	}{
		{
			name: "three with pids", targets: "direct=http://a,slogate=http://b,nginx=http://c", pids: "slogate=7,nginx=8+9",
			want: []target{{name: "direct", url: "http://a"}, {name: "slogate", url: "http://b", pids: []int{7}}, {name: "nginx", url: "http://c", pids: []int{8, 9}}},
		},
		{name: "no pids", targets: "d=http://a,x=http://b", want: []target{{name: "d", url: "http://a"}, {name: "x", url: "http://b"}}},
		{name: "one target", targets: "d=http://a", wantErr: true},
		{name: "duplicate", targets: "d=http://a,d=http://b", wantErr: true},
		{name: "no url", targets: "d=http://a,x", wantErr: true},
		{name: "pid of unknown target", targets: "d=http://a,x=http://b", pids: "y=1", wantErr: true},
		{name: "bad pid", targets: "d=http://a,x=http://b", pids: "x=1+z", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseTargets(tt.targets, tt.pids)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error %v", err, tt.wantErr)
			}
			if !slices.EqualFunc(got, tt.want, func(a, b target) bool {
				return a.name == b.name && a.url == b.url && slices.Equal(a.pids, b.pids)
			}) {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestOrder(t *testing.T) {
	ts := []target{{name: "a"}, {name: "b"}, {name: "c"}}
	names := func(ts []target) (s string) {
		for _, t := range ts {
			s += t.name
		}
		return s
	}
	for i, want := range []string{"abc", "cba", "abc", "cba"} {
		if got := names(order(ts, i)); got != want {
			t.Errorf("order(%d) = %s, want %s", i, got, want)
		}
	}
	if names(ts) != "abc" {
		t.Errorf("order changed its argument: %s", names(ts))
	}
}

// TestRSS reads this process's own /proc/<pid>/status.
func TestRSS(t *testing.T) {
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skip("no /proc")
	}
	r, err := rssSum([]int{os.Getpid(), os.Getpid()})
	if err != nil || r <= 0 {
		t.Fatalf("rssSum = %d, %v; want > 0", r, err)
	}
}
