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
	lora loraState
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
// engine from the names when k is KindAuto. An exposition with only the engine's info
// metric (SGLang before its first batch) is recognised, with its measurements unknown.
func read(fams map[string]*dto.MetricFamily, k Kind) (reading, error) {
	t := tableFor(k)
	if t == nil {
		t = detect(fams)
	}
	if t == nil {
		return reading{}, ErrUnrecognised
	}
	if !t.known(fams) {
		return reading{}, fmt.Errorf("%w (looked for %s metrics)", ErrUnrecognised, t.kind)
	}
	rd := reading{kind: t.kind, lora: noLoRA()}
	for i := range rd.v {
		rd.v[i] = math.NaN()
	}
	for _, src := range t.sources {
		for _, name := range src.names {
			if f, ok := fams[name]; ok {
				rd.v[src.field] = combined(f, src, t.roles(src))
				break
			}
		}
	}
	rd.v[fKVCapacity] = capacity(rd.v, fams, t)
	if f, ok := fams[t.lora]; ok {
		rd.lora = readLoRA(f)
	}
	return rd, nil
}

// capacity returns the KV capacity in tokens: the engine's gauge when it is positive
// (SGLang max_total_num_tokens, 0 before the first log in older releases), else page
// size x pages (SGLang's newest gauges), else the info metric's labels.
func capacity(v [numFields]float64, fams map[string]*dto.MetricFamily, t *table) float64 {
	if c := v[fKVCapacity]; c > 0 {
		return c
	}
	if c := v[fPageSize] * v[fNumPages]; c > 0 && finite(c) {
		return c
	}
	if f, ok := fams[t.capacityInfo]; ok {
		return infoCapacity(f, t.capacity, t.labels)
	}
	return math.NaN()
}

// sample is one series of a family: its labels and the value a source reads of it.
type sample struct {
	labels map[string]string
	v      float64
}

// combined merges the samples of a family for src; NaN when none holds a finite value.
func combined(f *dto.MetricFamily, src source, roles map[string]labelRole) float64 {
	samples := make([]sample, 0, len(f.GetMetric()))
	for _, m := range f.GetMetric() {
		labels := labelMap(m)
		if src.where != nil {
			if labels[src.where.name] != src.where.value {
				continue
			}
			delete(labels, src.where.name)
		}
		samples = append(samples, sample{labels, sampleValue(m, src.part)})
	}
	return merge(samples, src.combine, roles)
}

// merge folds samples by their labels' roles: breakdowns into their total, copies by
// max, then shards by how, in the order the shards first appear. Non-finite values are
// skipped. The result is finite or NaN.
func merge(samples []sample, how combine, roles map[string]labelRole) float64 {
	totals := foldBreakdowns(samples, roles)
	var keys []string
	shards := make(map[string]float64, len(totals))
	for _, s := range totals {
		key := labelKey(s.labels, roles, func(r labelRole) bool { return r == roleShard })
		if old, seen := shards[key]; seen {
			shards[key] = math.Max(old, s.v)
			continue
		}
		keys = append(keys, key)
		shards[key] = s.v
	}
	out := math.NaN()
	for _, k := range keys {
		v := shards[k]
		switch {
		case math.IsNaN(out):
			out = v
		case how == combineMax:
			out = math.Max(out, v)
		case how == combineMin:
			out = math.Min(out, v)
		default:
			out += v
		}
	}
	return finiteOrNaN(out)
}

// foldBreakdowns replaces each group of samples that differ only in breakdown labels by
// one sample: the total (the sample whose breakdown labels are all empty or absent; the
// largest if several) when there is one, else the sum of the parts. The result's labels
// carry no breakdown label.
func foldBreakdowns(samples []sample, roles map[string]labelRole) []sample {
	type group struct {
		labels       map[string]string
		total, parts float64
		hasTotal     bool
	}
	isBreakdown := func(r labelRole) bool { return r == roleBreakdown }
	var order []string
	groups := map[string]*group{}
	for _, s := range samples {
		if !finite(s.v) {
			continue
		}
		key := labelKey(s.labels, roles, func(r labelRole) bool { return !isBreakdown(r) })
		g, ok := groups[key]
		if !ok {
			g = &group{labels: without(s.labels, roles, roleBreakdown)}
			groups[key] = g
			order = append(order, key)
		}
		if isTotal(s.labels, roles) {
			if !g.hasTotal || s.v > g.total {
				g.total = s.v
			}
			g.hasTotal = true
		} else {
			g.parts += s.v
		}
	}
	out := make([]sample, 0, len(order))
	for _, k := range order {
		g := groups[k]
		v := g.parts
		if g.hasTotal {
			v = g.total
		}
		out = append(out, sample{g.labels, v})
	}
	return out
}

// isTotal reports whether every breakdown label of labels is empty.
func isTotal(labels map[string]string, roles map[string]labelRole) bool {
	for n, v := range labels {
		if roles[n] == roleBreakdown && v != "" {
			return false
		}
	}
	return true
}

// without returns labels less those of role r.
func without(labels map[string]string, roles map[string]labelRole, r labelRole) map[string]string {
	out := make(map[string]string, len(labels))
	for n, v := range labels {
		if roles[n] != r {
			out[n] = v
		}
	}
	return out
}

// labelKey identifies labels by those whose role keep accepts (unnamed labels are
// roleCopy), in a canonical order.
func labelKey(labels map[string]string, roles map[string]labelRole, keep func(labelRole) bool) string {
	pairs := make([]string, 0, len(labels))
	for n, v := range labels {
		if keep(roles[n]) {
			pairs = append(pairs, strconv.Quote(n)+"="+strconv.Quote(v))
		}
	}
	sort.Strings(pairs)
	return strings.Join(pairs, ",")
}

func labelMap(m *dto.Metric) map[string]string {
	labels := make(map[string]string, len(m.GetLabel()))
	for _, l := range m.GetLabel() {
		labels[l.GetName()] = l.GetValue()
	}
	return labels
}

func sampleValue(m *dto.Metric, p part) float64 {
	switch {
	case p == partSum && m.Histogram != nil:
		return m.Histogram.GetSampleSum()
	case p == partCount && m.Histogram != nil:
		return float64(m.Histogram.GetSampleCount())
	case p != partValue:
		return math.NaN()
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
func infoCapacity(f *dto.MetricFamily, capacity func(map[string]string) (float64, bool), roles map[string]labelRole) float64 {
	samples := make([]sample, 0, len(f.GetMetric()))
	for _, m := range f.GetMetric() {
		labels := labelMap(m)
		c, ok := capacity(labels)
		if !ok {
			c = math.NaN()
		}
		// The config labels themselves are not series labels: only the roles count.
		samples = append(samples, sample{onlyRoles(labels, roles), c})
	}
	return merge(samples, combineSum, roles)
}

// onlyRoles returns the labels that have a role in roles.
func onlyRoles(labels map[string]string, roles map[string]labelRole) map[string]string {
	out := map[string]string{}
	for n, v := range labels {
		if _, ok := roles[n]; ok {
			out[n] = v
		}
	}
	return out
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

// snapshot turns the reading into a Snapshot; the ratios and the queue time cover the
// interval since base, an earlier reading of the same engine with no counter reset
// between (see window). With no base they are unknown.
func (rd reading) snapshot(base *reading) Snapshot {
	s := NewSnapshot()
	s.Kind = rd.kind
	s.Waiting, s.WaitingCapacity, s.Running = rd.v[fWaiting], rd.v[fWaitingCapacity], rd.v[fRunning]
	s.KVUsage, s.KVCapacityTokens = rd.v[fKVUsage], rd.v[fKVCapacity]
	s.KVUsedTokens, s.KVAvailableTokens = rd.v[fKVUsed], rd.v[fKVAvailable]
	s.Preemptions = rd.v[fPreemptions]
	s.Sleeping = rd.v[fAwake] == 0
	s.LoRARunning, s.LoRAWaiting, s.LoRAMax = rd.lora.running, rd.lora.waiting, rd.lora.max
	s.SpecAcceptRate, s.SpecAcceptLength = rd.spec(base)
	if base != nil {
		s.PrefixHitRatio = delta(rd, *base, fPrefixHits, fPrefixQueries)
		s.QueueTimeMean = delta(rd, *base, fQueueSum, fQueueCount)
	}
	return s
}

// delta returns the growth of num over the growth of den from base to rd: finite, or NaN
// when den did not grow.
func delta(rd, base reading, num, den field) float64 {
	dn, dd := rd.v[num]-base.v[num], rd.v[den]-base.v[den]
	if dd > 0 && dn >= 0 {
		return finiteOrNaN(dn / dd)
	}
	return math.NaN()
}

// spec returns the speculative-decoding acceptance rate and mean acceptance length, on
// one definition for both engines: the rate is accepted draft tokens / draft tokens,
// the bonus token (the one the target model adds to every verify step) excluded; the
// length is tokens per verify step, the bonus token included (1 + accepted / drafts).
//
// vLLM (vllm/v1/spec_decode/metrics.py) counts accepted tokens without the bonus token,
// so both come from its counters over the window since base. SGLang exports two gauges
// over its last decode-log interval (scheduler_metrics_mixin.py, log_decode_stats):
// length L = (accepted + steps) / steps and rate R = (accepted + steps) / (steps x N),
// N its draft tokens per step including the bonus slot; so N = L/R and the rate without
// the bonus token is (L-1)/(N-1) = R(L-1)/(L-R). SGLang writes 0 to both when it does
// not speculate, which reads as unknown here.
func (rd reading) spec(base *reading) (rate, length float64) {
	if rd.kind == KindSGLang {
		l, r := rd.v[fSpecLength], rd.v[fSpecRate]
		if !(l >= 1 && r > 0) { // NaN compares false
			return math.NaN(), math.NaN()
		}
		rate = math.NaN()
		if l > r {
			rate = finiteOrNaN(r * (l - 1) / (l - r))
		}
		return rate, l
	}
	if base == nil {
		return math.NaN(), math.NaN()
	}
	rate = delta(rd, *base, fSpecAccepted, fSpecDrafted)
	length = delta(rd, *base, fSpecAccepted, fSpecDrafts)
	return rate, length + 1
}
