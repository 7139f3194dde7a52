package exporter

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Limits of the /metrics handler.
const (
	// scrapeTimeout bounds one /metrics response; collectors read in-memory state, so a
	// slow scrape means something is wrong.
	scrapeTimeout = 10 * time.Second
	// maxScrapesInFlight bounds concurrent /metrics requests.
	maxScrapesInFlight = 8
)

// Handler serves every metric of reg, as GET /metrics does. Content negotiation offers
// the Prometheus text and protobuf formats (protobuf carries native histograms) and
// OpenMetrics (which carries exemplars). A collector's error leaves the others served.
// The handler's own promhttp_metric_handler_* metrics are registered on reg (once,
// however often Handler is called). It is safe for concurrent use.
func Handler(reg *prometheus.Registry) http.Handler {
	return promhttp.InstrumentMetricHandler(reg, promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorHandling:       promhttp.ContinueOnError,
		Registry:            reg,
		MaxRequestsInFlight: maxScrapesInFlight,
		Timeout:             scrapeTimeout,
		EnableOpenMetrics:   true,
	}))
}
