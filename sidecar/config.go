package sidecar

import (
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/caarlos0/env/v11"

	"github.com/slogate/slogate/measure"
	"github.com/slogate/slogate/synth"
)

// Config is the sidecar's settings: the settings of `slogate serve`. Each field carries
// its flag name (`flag`), environment variable (`env`), default (`envDefault`) and
// meaning (`help`); package settings reads them through those tags, and slogate's help
// text and docs/operations.md are generated from them. The embedded groups (Endpoint,
// SLO, Calibration, Push, Log) are shared with other commands (slogate probe,
// calibrate and sim), so that a setting they have in common is defined once.
type Config struct {
	Endpoint                          // --upstream, --upstream-api-key
	Listen              string        `flag:"listen" env:"SLOGATE_LISTEN" envDefault:":8080" help:"address clients connect to"`
	AdminListen         string        `flag:"admin-listen" env:"SLOGATE_ADMIN_LISTEN" envDefault:":9090" help:"address of /metrics, /healthz and /readyz"`
	Engine              string        `flag:"engine" env:"SLOGATE_ENGINE" envDefault:"auto" help:"the engine behind slogate: auto, vllm or sglang"`
	SLO                               // --slo-ttft, --slo-tpot
	Admission           string        `flag:"admission" env:"SLOGATE_ADMISSION" envDefault:"shadow" help:"admission control: off, shadow (decide and record, never delay or reject) or enforce"`
	TiersFile           string        `flag:"tiers-file" env:"SLOGATE_TIERS_FILE" envDefault:"" help:"YAML file of admission tiers (reloaded on SIGHUP, on change and on POST /-/reload); empty: the built-in tiers"`
	StalePolicy         string        `flag:"stale-policy" env:"SLOGATE_STALE_POLICY" envDefault:"open" help:"when engine metrics are stale or missing: open (admit, ignoring them) or closed (answer 503)"`
	StaleAfter          time.Duration `flag:"stale-after" env:"SLOGATE_STALE_AFTER" envDefault:"5s" help:"engine metrics older than this are stale"`
	SaturationQueue     float64       `flag:"saturation-queue" env:"SLOGATE_SATURATION_QUEUE" envDefault:"8" help:"the engine is saturated when this many requests wait in its queue"`
	SaturationKV        float64       `flag:"saturation-kv" env:"SLOGATE_SATURATION_KV" envDefault:"0.9" help:"the engine is saturated at this KV-cache usage (reported, or slogate's in-flight tokens against capacity)"`
	ProbeWorkload       string        `flag:"probe-workload" env:"SLOGATE_PROBE_WORKLOAD" envDefault:"" help:"probe workload to schedule: a preset (context-matrix, shapes, rate-scan) or a YAML file; empty: no probes"`
	ProbeInterval       time.Duration `flag:"probe-interval" env:"SLOGATE_PROBE_INTERVAL" envDefault:"6h" help:"time between scheduled probes (plus jitter); 0: only on POST /-/probe"`
	ProbeJitter         float64       `flag:"probe-jitter" env:"SLOGATE_PROBE_JITTER" envDefault:"0.1" help:"share of the probe interval added at random, so replicas do not probe in step"`
	ProbeQuick          bool          `flag:"probe-quick" env:"SLOGATE_PROBE_QUICK" envDefault:"false" help:"run the probe workload's quick variant (about a minute)"`
	ProbeMaxLoad        float64       `flag:"probe-max-load" env:"SLOGATE_PROBE_MAX_LOAD" envDefault:"0.5" help:"probes and calibrations hold back while live traffic holds more than this share of the engine's KV cache, the engine is saturated, or live p95 TTFT is over its SLO"`
	ProbeHistoryDir     string        `flag:"probe-history-dir" env:"SLOGATE_PROBE_HISTORY_DIR" envDefault:"" help:"directory where the last probe runs of each workload are kept as report JSON files and read back on start (a volume, to survive restarts); each run is compared with the one before, which raises slogate_probe_regression; empty: no history"`
	ProbeHistoryRuns    int           `flag:"probe-history-runs" env:"SLOGATE_PROBE_HISTORY_RUNS" envDefault:"20" help:"probe runs the history keeps per workload, at least 2; the oldest go first"`
	ProbeHistoryBytes   int64         `flag:"probe-history-bytes" env:"SLOGATE_PROBE_HISTORY_BYTES" envDefault:"67108864" help:"total size of the probe runs the history keeps, all workloads together; the oldest go first, but the newest run of each workload always stays"`
	Calibrate           bool          `flag:"calibrate" env:"SLOGATE_CALIBRATE" envDefault:"false" help:"measure each tier's knee from inside the sidecar, on POST /-/calibrate and every --calibrate-interval; it drives the engine past its knee for minutes, so choose quiet hours"`
	CalibrateInterval   time.Duration `flag:"calibrate-interval" env:"SLOGATE_CALIBRATE_INTERVAL" envDefault:"0s" help:"time between scheduled calibrations (plus up to 10%); 0: only on POST /-/calibrate"`
	CalibrateApply      bool          `flag:"calibrate-apply" env:"SLOGATE_CALIBRATE_APPLY" envDefault:"false" help:"put calibrated limits in force at once; false: only publish them (GET /calibration/tiers.yaml, slogate_calibration_* metrics) for review"`
	Calibration                       // --calibrate-round, --calibrate-output
	ScrapeInterval      time.Duration `flag:"scrape-interval" env:"SLOGATE_SCRAPE_INTERVAL" envDefault:"1s" help:"how often the engine's /metrics is read"`
	UpstreamTimeout     time.Duration `flag:"upstream-timeout" env:"SLOGATE_UPSTREAM_TIMEOUT" envDefault:"10m" help:"longest wait for the engine's response headers before 504 (0: none)"`
	StreamIdleTimeout   time.Duration `flag:"stream-idle-timeout" env:"SLOGATE_STREAM_IDLE_TIMEOUT" envDefault:"60s" help:"longest silence of a streaming answer (before its first token or between two): the engine's request is cancelled and the client's stream ends with an error event, counted as upstream_timeout (0: none)"`
	MaxBodyBytes        int64         `flag:"max-body-bytes" env:"SLOGATE_MAX_BODY_BYTES" envDefault:"67108864" help:"largest inference request body; larger ones get 413"`
	BodyTimeout         time.Duration `flag:"body-timeout" env:"SLOGATE_BODY_TIMEOUT" envDefault:"60s" help:"longest time a client may take to send a request's body, from the end of its headers; a slower one gets 408 and its connection is closed (0: none)"`
	InjectUsage         bool          `flag:"inject-usage" env:"SLOGATE_INJECT_USAGE" envDefault:"true" help:"ask the engine for usage on streams that did not, and strip it, so output tokens are exact"`
	ReadHeaderTimeout   time.Duration `flag:"read-header-timeout" env:"SLOGATE_READ_HEADER_TIMEOUT" envDefault:"10s" help:"longest time a client may take to send a request's headers (from the connection's accept, or on a kept-alive connection from the next request's first bytes); a slower client (slowloris) has its connection closed (sometimes after a 400). It bounds neither request bodies nor responses"`
	IdleTimeout         time.Duration `flag:"idle-timeout" env:"SLOGATE_IDLE_TIMEOUT" envDefault:"2m" help:"longest time a keep-alive client connection may wait for its next request before slogate closes it"`
	DetachStreams       bool          `flag:"detach-streams" env:"SLOGATE_DETACH_STREAMS" envDefault:"true" help:"once a stream's headers are out, take its HTTP/1.1 connection over from the HTTP server and stream on a goroutine of slogate's own, parking the connection without a goroutine between requests: about half the memory per stream (Linux only; false keeps every stream on the server's connection)"`
	DrainTimeout        time.Duration `flag:"drain-timeout" env:"SLOGATE_DRAIN_TIMEOUT" envDefault:"30s" help:"on SIGTERM, how long in-flight requests may take to finish"`
	AdminTokenFile      string        `flag:"admin-token-file" env:"SLOGATE_ADMIN_TOKEN_FILE" envDefault:"" help:"file holding a bearer token the admin listener requires on every path but /healthz and /readyz (e.g. a mounted Secret); empty: none"`
	EnableAdminAPI      bool          `flag:"enable-admin-api" env:"SLOGATE_ENABLE_ADMIN_API" envDefault:"false" help:"serve the admin endpoints that change what slogate does: POST /-/reload, /-/probe and /-/calibrate; off, they answer 403"`
	TrustClientPriority bool          `flag:"trust-client-priority" env:"SLOGATE_TRUST_CLIENT_PRIORITY" envDefault:"false" help:"let any client mark requests as probes (X-Slogate-Priority: probe: kept out of the live metrics, admitted from headroom), e.g. for slogate probe run from outside the pod; off, only the sidecar's own prober may, and other claims are served as interactive"`
	WebConfigFile       string        `flag:"web-config-file" env:"SLOGATE_WEB_CONFIG_FILE" envDefault:"" help:"exporter-toolkit web config (TLS, basic auth) for the admin listener"`
	TraceSampleRatio    float64       `flag:"trace-sample-ratio" env:"SLOGATE_TRACE_SAMPLE_RATIO" envDefault:"0.01" help:"share of the requests whose client sent no traceparent whose traces are exported (a client's sampled flag decides for its own); traces are on when OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set, and requests that fail, are rejected or miss their SLO are exported whatever the share"`
	TraceContent        bool          `flag:"trace-content" env:"SLOGATE_TRACE_CONTENT" envDefault:"false" help:"record the prompt and the answer's text in each exported trace (gen_ai.input.messages, gen_ai.output.messages, at most 64 KiB each); off, a span never holds either"`
	Push                              // --push-url, --push-labels
	PushInterval        time.Duration `flag:"push-interval" env:"SLOGATE_PUSH_INTERVAL" envDefault:"15s" help:"how often to push when --push-url is set"`
	NativeHist          bool          `flag:"native-histograms" env:"SLOGATE_NATIVE_HISTOGRAMS" envDefault:"false" help:"also expose native histograms, for Prometheus servers that scrape them"`
	DCGM                string        `flag:"dcgm" env:"SLOGATE_DCGM" envDefault:"embedded" help:"GPU metrics from NVIDIA DCGM: embedded (DCGM inside slogate; needs libdcgm.so.4 and the GPUs visible), host:port of an nv-hostengine (e.g. the GPU operator's on the node), or off; without DCGM slogate_gpu_collector_up is 0"`
	Log                               // --log-level, --log-format
}

// Endpoint is the engine slogate talks to, shared by serve, probe and calibrate.
type Endpoint struct {
	Upstream       string `flag:"upstream" env:"SLOGATE_UPSTREAM" envDefault:"http://127.0.0.1:8000" help:"the engine's base URL"`
	UpstreamAPIKey string `flag:"upstream-api-key" env:"SLOGATE_UPSTREAM_API_KEY" envDefault:"" secret:"true" help:"bearer token for slogate's own requests to the engine (its /v1/models, probes and calibrations), for engines started with an API key (vLLM's and SGLang's --api-key); never logged"`
}

// Target returns a synthetic-traffic target for the engine itself.
func (e Endpoint) Target() *synth.Target {
	return &synth.Target{BaseURL: e.Upstream, APIKey: e.UpstreamAPIKey}
}

// SLO is the latency objectives of tiers that set none, shared by serve and calibrate.
type SLO struct {
	SLOTTFT time.Duration `flag:"slo-ttft" env:"SLOGATE_SLO_TTFT" envDefault:"2s" help:"time-to-first-token SLO of tiers that set none; serve puts a histogram bucket boundary exactly on it"`
	SLOTPOT time.Duration `flag:"slo-tpot" env:"SLOGATE_SLO_TPOT" envDefault:"100ms" help:"time-per-output-token SLO of tiers that set none; serve puts a histogram bucket boundary exactly on it"`
}

// Objective returns the objectives as one measure.SLO, the type every part judges by.
func (s SLO) Objective() measure.SLO { return measure.NewSLO(s.SLOTTFT, s.SLOTPOT) }

// Calibration is how a calibration measures, shared by serve's calibrations and
// slogate calibrate.
type Calibration struct {
	CalibrateRound  time.Duration `flag:"calibrate-round" env:"SLOGATE_CALIBRATE_ROUND" envDefault:"60s" help:"arrival window of each rate a calibration measures"`
	CalibrateOutput int           `flag:"calibrate-output" env:"SLOGATE_CALIBRATE_OUTPUT" envDefault:"128" help:"output tokens of every calibration request"`
}

// Push is where metrics are pushed, shared by serve (every --push-interval) and slogate
// probe (once, after its run).
type Push struct {
	PushURL    string `flag:"push-url" env:"SLOGATE_PUSH_URL" envDefault:"" help:"push metrics in Prometheus text format to this URL (e.g. vmagent's or VictoriaMetrics' /api/v1/import/prometheus): serve every --push-interval, probe once after its run"`
	PushLabels string `flag:"push-labels" env:"SLOGATE_PUSH_LABELS" envDefault:"" help:"extra labels on pushed metrics, e.g. pod=\"a\",namespace=\"b\""`
}

// Log is the log's level and format, shared by serve and sim; NewLogger reads them.
type Log struct {
	LogLevel  string `flag:"log-level" env:"SLOGATE_LOG_LEVEL" envDefault:"info" help:"debug, info, warn or error"`
	LogFormat string `flag:"log-format" env:"SLOGATE_LOG_FORMAT" envDefault:"json" help:"json or text"`
}

// DefaultConfig returns the defaults of every setting, as `slogate serve` starts with no
// flags and no environment.
func DefaultConfig() Config {
	var cfg Config
	if err := env.ParseWithOptions(&cfg, env.Options{Environment: map[string]string{}}); err != nil {
		panic("sidecar: a default does not parse: " + err.Error()) // a defect in the tags above
	}
	return cfg
}

// check reports the first setting of c that cannot work, naming its flag.
func (c Config) check() error {
	u, err := url.Parse(c.Upstream)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return fmt.Errorf("--upstream %q: want an absolute URL such as http://127.0.0.1:8000", c.Upstream)
	}
	if c.SLOTTFT <= 0 || c.SLOTPOT <= 0 {
		return errors.New("the TTFT and TPOT SLOs must be positive")
	}
	if c.ReadHeaderTimeout <= 0 || c.IdleTimeout <= 0 {
		return errors.New("--read-header-timeout and --idle-timeout must be positive")
	}
	if c.StalePolicy != "open" && c.StalePolicy != "closed" {
		return fmt.Errorf("--stale-policy %q: want open or closed", c.StalePolicy)
	}
	if !(c.ProbeMaxLoad > 0 && c.ProbeMaxLoad <= 1) || c.ProbeJitter < 0 || c.ProbeJitter > 1 {
		return errors.New("--probe-max-load must be in (0,1] and --probe-jitter in [0,1]")
	}
	if !(c.TraceSampleRatio >= 0 && c.TraceSampleRatio <= 1) {
		return fmt.Errorf("--trace-sample-ratio %g: want a share in [0,1]", c.TraceSampleRatio)
	}
	if c.ProbeHistoryRuns < 2 || c.ProbeHistoryBytes <= 0 {
		return errors.New("--probe-history-runs must be at least 2 (a run is compared with the one before) and --probe-history-bytes positive")
	}
	if c.Calibrate && (c.CalibrateInterval < 0 || c.CalibrateRound < time.Second || c.CalibrateOutput < 2) {
		return errors.New("--calibrate-interval must not be negative, --calibrate-round must be at least 1s and --calibrate-output at least 2 tokens")
	}
	return nil
}
