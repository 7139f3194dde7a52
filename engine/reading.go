package engine

import (
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// ErrUnrecognised reports an exposition that carries no metric of a known engine.
var ErrUnrecognised = errors.New("engine: no vLLM or SGLang metrics in the exposition")

// ErrMalformed reports an exposition that is not valid Prometheus text.
var ErrMalformed = errors.New("engine: malformed metrics exposition")

// reading is the raw result of one scrape: each field's combined value (NaN when the
// engine does not expose it) and the engine it came from. Every value is finite or NaN.
type reading struct {
	kind Kind
	v    [numFields]float64
}

// parseExposition decodes a Prometheus text exposition (format 0.0.4) into metric
// families. It also reads what prometheus_client writes as OpenMetrics (counters as
// name_total samples, _created samples, the final "# EOF" line), since the text parser
// takes the extra samples as untyped families and "# EOF" as a comment; OpenMetrics-only
// syntax (exemplars, timestamps in seconds, info and stateset types) is an error.
func parseExposition(r io.Reader) (map[string]*dto.MetricFamily, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	return fams, nil
}

// read maps metric families onto a reading, using the table of kind k, or detecting the
// engine from the names when k is KindAuto.
func read(fams map[string]*dto.MetricFamily, k Kind) (reading, error) {
	t := tableFor(k)
	if t == nil {
		t = detect(fams)
	}
	if t == nil {
		return reading{}, ErrUnrecognised
	}
	rd := reading{kind: t.kind}
	for i := range rd.v {
		rd.v[i] = math.NaN()
	}
	found := false
	for _, src := range t.sources {
		for _, name := range src.names {
			if f, ok := fams[name]; ok {
				rd.v[src.field] = combined(f, src.combine, t.shards)
				found = true
				break
			}
		}
	}
	if !found {
		return reading{}, fmt.Errorf("%w (looked for %s metrics)", ErrUnrecognised, t.kind)
	}
	if f, ok := fams[t.capacityInfo]; ok && !Known(rd.v[fKVCapacity]) {
		rd.v[fKVCapacity] = infoCapacity(f, t.capacity, t.shards)
	}
	return rd, nil
}

// combined merges the samples of a family; NaN when none holds a finite value. Samples
// that differ only in shard labels are copies of one replica's value (tensor-parallel
// ranks of one scheduler) and merge by max; replicas merge by how.
func combined(f *dto.MetricFamily, how combine, shards []string) float64 {
	values := make([]float64, 0, len(f.GetMetric()))
	for _, m := range f.GetMetric() {
		values = append(values, sampleValue(m))
	}
	return merge(f.GetMetric(), values, how, shards)
}

// merge folds values[i] (the value of metrics[i]; NaN to skip) per replica by max, then
// across replicas by how, in the order the replicas first appear. The result is finite
// or NaN.
func merge(metrics []*dto.Metric, values []float64, how combine, shards []string) float64 {
	var keys []string
	replicas := make(map[string]float64, len(values))
	for i, v := range values {
		if !finite(v) {
			continue
		}
		key := replicaKey(metrics[i], shards)
		old, seen := replicas[key]
		if !seen {
			keys = append(keys, key)
		} else {
			v = math.Max(old, v)
		}
		replicas[key] = v
	}
	out := math.NaN()
	for _, k := range keys {
		v := replicas[k]
		switch {
		case math.IsNaN(out):
			out = v
		case how == combineMax:
			out = math.Max(out, v)
		default:
			out += v
		}
	}
	return finiteOrNaN(out)
}

// replicaKey identifies the replica a sample belongs to: its labels without the shard
// labels, in a canonical order. (Two samples with the same labels, which a valid
// exposition does not hold, are thus one series: the larger wins.)
func replicaKey(m *dto.Metric, shards []string) string {
	pairs := make([]string, 0, len(m.GetLabel()))
	for _, l := range m.GetLabel() {
		if !contains(shards, l.GetName()) {
			pairs = append(pairs, strconv.Quote(l.GetName())+"="+strconv.Quote(l.GetValue()))
		}
	}
	sort.Strings(pairs)
	return strings.Join(pairs, ",")
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func sampleValue(m *dto.Metric) float64 {
	switch {
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Untyped != nil:
		return m.Untyped.GetValue()
	}
	return math.NaN()
}

// infoCapacity sums the KV capacity an info metric's label sets give (one per engine).
func infoCapacity(f *dto.MetricFamily, capacity func(map[string]string) (float64, bool), shards []string) float64 {
	values := make([]float64, 0, len(f.GetMetric()))
	for _, m := range f.GetMetric() {
		labels := make(map[string]string, len(m.GetLabel()))
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		c, ok := capacity(labels)
		if !ok {
			c = math.NaN()
		}
		values = append(values, c)
	}
	return merge(f.GetMetric(), values, combineSum, shards)
}

// number parses a label value as a finite number.
func number(s string) (float64, bool) {
	v, err := strconv.ParseFloat(s, 64)
	return v, err == nil && finite(v)
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// finiteOrNaN returns v, or NaN when v is infinite (an overflowing sum or product).
func finiteOrNaN(v float64) float64 {
	if math.IsInf(v, 0) {
		return math.NaN()
	}
	return v
}

// snapshot turns the reading into a Snapshot, computing the interval ratios from the
// previous reading of the same engine where the counters allow it.
func (rd reading) snapshot(prev *reading) Snapshot {
	s := NewSnapshot()
	s.Kind = rd.kind
	s.Waiting, s.Running = rd.v[fWaiting], rd.v[fRunning]
	s.KVUsage, s.KVCapacityTokens = rd.v[fKVUsage], rd.v[fKVCapacity]
	s.Preemptions = rd.v[fPreemptions]
	s.PrefixHitRatio = rd.ratio(prev, fPrefixHits, fPrefixQueries, fPrefixRatio)
	s.SpecAcceptRate = rd.ratio(prev, fSpecAccepted, fSpecDrafted, fSpecRate)
	return s
}

// ratio returns num/den over the interval since prev; cumulative when there is no usable
// previous reading (none, another engine, a counter reset, or no traffic since); the
// engine's own gauge when it exports the ratio directly. The result is finite or NaN.
func (rd reading) ratio(prev *reading, num, den, gauge field) float64 {
	if Known(rd.v[gauge]) {
		return rd.v[gauge]
	}
	n, d := rd.v[num], rd.v[den]
	if prev != nil && prev.kind == rd.kind {
		dn, dd := n-prev.v[num], d-prev.v[den]
		if dd > 0 && dn >= 0 {
			return finiteOrNaN(dn / dd)
		}
	}
	if d > 0 {
		return finiteOrNaN(n / d)
	}
	return math.NaN()
}
