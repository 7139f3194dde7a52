package admission

import (
	"math"
	"time"
)

// Allowance is one budget's state as a client sees it in the x-ratelimit-* headers.
type Allowance struct {
	Limit     float64       // the budget per minute (or the concurrency cap); 0: no budget
	Remaining float64       // what is left now, never below 0
	Reset     time.Duration // until the budget is whole again
}

// Set reports whether the allowance is of a budget at all.
func (a Allowance) Set() bool { return a.Limit > 0 }

// Quota is a tenant's per-minute budgets at one moment: what the x-ratelimit-* headers
// of its responses carry.
type Quota struct {
	Requests, InputTokens, OutputTokens Allowance
}

// Tokens returns the token budget that binds first — of those set, the one with the
// least left relative to its limit — for the x-ratelimit-*-tokens headers, which know one
// token budget; the zero Allowance when neither is set.
func (q Quota) Tokens() Allowance {
	in, out := q.InputTokens, q.OutputTokens
	switch {
	case !in.Set():
		return out
	case !out.Set():
		return in
	case out.Remaining/out.Limit < in.Remaining/in.Limit:
		return out
	}
	return in
}

// Set reports whether any per-minute budget is set.
func (q Quota) Set() bool { return q.Requests.Set() || q.InputTokens.Set() || q.OutputTokens.Set() }

// bucket is a per-minute budget: a token bucket that holds one minute's worth and
// refills continuously. Its level may go below zero when a request settles for more than
// it reserved; new reservations then wait until it has refilled. Guarded by the
// Controller's lock.
type bucket struct {
	perMinute float64 // 0: no budget
	level     float64
	at        time.Time // when level was last brought up to date
}

// configure sets the budget, keeping the share of it that is left.
func (b *bucket) configure(perMinute float64, now time.Time) {
	b.refill(now)
	switch {
	case perMinute == 0:
		b.level = 0
	case b.perMinute == 0:
		b.level = perMinute // a new budget starts full
	default:
		b.level *= perMinute / b.perMinute
	}
	b.perMinute, b.at = perMinute, now
}

func (b *bucket) refill(now time.Time) {
	if b.perMinute == 0 || !now.After(b.at) {
		return
	}
	b.level = min(b.perMinute, b.level+b.perMinute*now.Sub(b.at).Minutes())
	b.at = now
}

// need returns how long until n fits in the bucket: 0 when it does now or there is no
// budget, and a negative value when it never will (n is more than a minute's worth).
func (b *bucket) need(n float64, now time.Time) time.Duration {
	if b.perMinute == 0 {
		return 0
	}
	b.refill(now)
	switch {
	case n > b.perMinute:
		return -1
	case n <= b.level:
		return 0
	}
	return time.Duration(math.Ceil((n - b.level) / b.perMinute * float64(time.Minute)))
}

// take removes n from the bucket (a negative n gives it back, never above a full minute).
func (b *bucket) take(n float64, now time.Time) {
	if b.perMinute == 0 {
		return
	}
	b.refill(now)
	b.level = min(b.level-n, b.perMinute)
}

func (b *bucket) allowance(now time.Time) Allowance {
	if b.perMinute == 0 {
		return Allowance{}
	}
	b.refill(now)
	missing := b.perMinute - b.level
	return Allowance{
		Limit: b.perMinute, Remaining: max(b.level, 0),
		Reset: time.Duration(math.Ceil(missing / b.perMinute * float64(time.Minute))),
	}
}
