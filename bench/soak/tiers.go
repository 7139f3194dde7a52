package soak

import "fmt"

// Tiers returns the admission tiers (a tiers file) for a load of clients: tight enough
// that part of the load waits in a queue and part is turned away with 429, so that
// queueing, rejection and clients leaving the queue all run all the time. Short prompts
// (up to 512 tokens) may have half the clients in flight and a tenth queued for up to a
// second; long ones 5% in flight, 2% queued for half a second, and an arrival rate of 3%
// of the clients per second. The SLO feedback may lower each in-flight cap to 40% of it.
func Tiers(clients int) string {
	c := max(clients, 50)
	return fmt.Sprintf(`tiers:
  - name: short
    max_input_tokens: 512
    max_in_flight: %d
    min_in_flight: %d
    max_queue: %d
    max_queue_wait: 1s
  - name: long
    rate: %d
    burst: %d
    max_in_flight: %d
    min_in_flight: %d
    max_queue: %d
    max_queue_wait: 500ms
`, c/2, c/5, c/10, c*3/100, c/20, c/20, c/50, c/50)
}
