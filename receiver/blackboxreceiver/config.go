package blackboxreceiver

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"go.opentelemetry.io/collector/config/configoptional"

	"github.com/tierscope/tierscope/receiver/blackboxreceiver/internal/accesslog"
	"github.com/tierscope/tierscope/receiver/blackboxreceiver/internal/bpffilter"
)

// Config is the configuration of the blackbox receiver. Every source is
// optional; the traces sources (capture, tracefile, accesslog) run in a traces
// pipeline and connections in a metrics pipeline.
type Config struct {
	// Services names the nodes: keys are an IP address, an IP:port or a CIDR
	// prefix; values a service name, or "service/instance" when several
	// processes share a name (replicas). All addresses mapped to one value are
	// one node (a host with several interfaces). Unnamed endpoints are named by
	// their IP address.
	Services map[string]string `mapstructure:"services"`

	Capture     configoptional.Optional[CaptureConfig]     `mapstructure:"capture"`
	TraceFile   configoptional.Optional[TraceFileConfig]   `mapstructure:"tracefile"`
	AccessLogs  []AccessLogConfig                          `mapstructure:"accesslog"`
	Connections configoptional.Optional[ConnectionsConfig] `mapstructure:"connections"`

	// MaxQueuedBatches bounds the span batches waiting for the next consumer;
	// beyond it batches are dropped and counted, so a slow pipeline never
	// stalls the capture.
	MaxQueuedBatches int `mapstructure:"max_queued_batches"`
}

// CapturePoint is where packets are captured and which.
type CapturePoint struct {
	// Interface to capture on; "" or "any" for all interfaces.
	Interface string `mapstructure:"interface"`
	// NetworkNamespace, when set, is the path of the network namespace to
	// capture in (/run/netns/NAME, /proc/PID/ns/net).
	NetworkNamespace string `mapstructure:"network_namespace"`
	// Ports and Hosts make the BPF filter: packets to or from one of the ports
	// (any when empty) and one of the hosts (any when empty). Ports are also
	// taken as server ports when a connection's handshake was not captured.
	Ports []uint16 `mapstructure:"ports"`
	Hosts []string `mapstructure:"hosts"`
}

// CaptureConfig configures live capture.
type CaptureConfig struct {
	// The capture point, when there is one.
	CapturePoint `mapstructure:",squash"`
	// Points lists several capture points (e.g. one per network namespace) that
	// feed one stream of spans; when set, the point above is not used. Their
	// filters should not select the same connection twice.
	Points []CapturePoint `mapstructure:"points"`
	// Framing is auto (HTTP/1.x when the first request looks like it, else
	// generic), http or generic; HTTPPorts and GenericPorts override it per
	// server port.
	Framing      string   `mapstructure:"framing"`
	HTTPPorts    []uint16 `mapstructure:"http_ports"`
	GenericPorts []uint16 `mapstructure:"generic_ports"`
	// Spans lists the span kinds emitted per call: client, server or both.
	Spans []string `mapstructure:"spans"`
	// PairSpans makes the SERVER span of a call the child of its CLIENT span
	// (both ends of one connection were seen, so the pair is known); off, the
	// two spans are unrelated and causalpath pairs them by timing alone.
	PairSpans bool `mapstructure:"pair_spans"`
	// Routes turn URL paths into http.route templates, e.g. /txn/{name}.
	Routes []string `mapstructure:"routes"`

	Snaplen int `mapstructure:"snaplen"`
	// SocketBuffer is the kernel-side buffer: the TPACKET_V3 ring, or with
	// ring off the socket's receive queue.
	SocketBuffer int `mapstructure:"socket_buffer"`
	// Ring reads packets from a memory-mapped TPACKET_V3 ring (no system call
	// per packet); off, one recvmsg(2) per packet.
	Ring          bool          `mapstructure:"ring"`
	MaxFlows      int           `mapstructure:"max_flows"`
	MaxFlowBuffer int           `mapstructure:"max_flow_buffer"`
	MaxBuffer     int           `mapstructure:"max_buffer"`
	MaxHeader     int           `mapstructure:"max_header"`
	GapTimeout    time.Duration `mapstructure:"gap_timeout"`
	IdleTimeout   time.Duration `mapstructure:"idle_timeout"`
	// Quiet ends a generically framed response after this much silence when
	// the client sends nothing more.
	Quiet time.Duration `mapstructure:"quiet"`
	// FlushInterval and MaxBatch bound how long and how many spans wait
	// before they are sent on.
	FlushInterval time.Duration `mapstructure:"flush_interval"`
	MaxBatch      int           `mapstructure:"max_batch"`
	// ReorderWindow holds calls for this long after they end, so that they
	// leave in the order of their ends: a caller's spans never before its
	// callees', even when they were framed at different capture points.
	ReorderWindow time.Duration `mapstructure:"reorder_window"`
}

// TraceFileConfig configures the replay of a message trace (docs/formats.md §1).
type TraceFileConfig struct {
	Path string `mapstructure:"path"`
	// Speed is the replay speed: 1 is the original pace, 10 ten times faster,
	// 0 as fast as possible.
	Speed float64 `mapstructure:"speed"`
	// Rebase shifts (and, sped up, compresses) timestamps so that the trace
	// starts now; otherwise spans keep the file's timestamps.
	Rebase bool `mapstructure:"rebase"`
	// Loop replays the file again when it ends.
	Loop bool `mapstructure:"loop"`
	// PairSpans makes each call's SERVER span the child of its CLIENT span
	// (the trace's call pairs are known); off, causalpath pairs them.
	PairSpans bool `mapstructure:"pair_spans"`
}

// AccessLogConfig configures one access log.
type AccessLogConfig struct {
	Path string `mapstructure:"path"`
	// Format is a preset (nginx_timed, apache_timed), or nginx or apache with
	// LogFormat written in that server's syntax.
	Format    string `mapstructure:"format"`
	LogFormat string `mapstructure:"log_format"`
	// Service is the service.name of the spans (the web server's node).
	Service  string `mapstructure:"service"`
	Instance string `mapstructure:"instance"`
	// Routes turn URL paths into http.route templates, e.g. /txn/{name}.
	Routes []string `mapstructure:"routes"`
	// StartAt is end (only new lines) or beginning.
	StartAt      string        `mapstructure:"start_at"`
	PollInterval time.Duration `mapstructure:"poll_interval"`
	MaxLineBytes int           `mapstructure:"max_line_bytes"`
}

// ConnectionsConfig configures the connection inventory.
type ConnectionsConfig struct {
	Interval time.Duration `mapstructure:"interval"`
	// ProcPath is the proc file system (for /proc/<pid>/fd).
	ProcPath string `mapstructure:"proc_path"`
	// NetworkNamespace, when set, is the namespace whose TCP tables are read.
	NetworkNamespace string `mapstructure:"network_namespace"`
	// EphemeralPorts is "LO-HI"; empty reads the kernel's ip_local_port_range.
	EphemeralPorts string `mapstructure:"ephemeral_ports"`
	MaxProcesses   int    `mapstructure:"max_processes"`
}

func defaultCapture() CaptureConfig {
	return CaptureConfig{
		Framing: "auto", Spans: []string{"client", "server"}, PairSpans: true,
		Snaplen: 256 << 10, SocketBuffer: 8 << 20, Ring: true,
		MaxFlows: 10000, MaxFlowBuffer: 256 << 10, MaxBuffer: 64 << 20, MaxHeader: 32 << 10,
		GapTimeout: 500 * time.Millisecond, IdleTimeout: 2 * time.Minute, Quiet: 200 * time.Millisecond,
		FlushInterval: 200 * time.Millisecond, MaxBatch: 2000, ReorderWindow: 200 * time.Millisecond,
	}
}

func defaultTraceFile() TraceFileConfig {
	return TraceFileConfig{Speed: 1, Rebase: true, PairSpans: true}
}

func defaultConnections() ConnectionsConfig {
	return ConnectionsConfig{Interval: 10 * time.Second, ProcPath: "/proc", MaxProcesses: 100000}
}

// Validate checks the top-level fields; the collector calls each nested
// struct's Validate too (xconfmap.Validate).
func (c *Config) Validate() error {
	var errs []error
	if _, err := parseServices(c.Services); err != nil {
		errs = append(errs, err)
	}
	if c.MaxQueuedBatches <= 0 {
		errs = append(errs, fmt.Errorf("max_queued_batches must be > 0, got %d", c.MaxQueuedBatches))
	}
	return errors.Join(errs...)
}

// Validate checks the trace file's path and speed.
func (t *TraceFileConfig) Validate() error {
	var errs []error
	if t.Path == "" {
		errs = append(errs, errors.New("path is required"))
	}
	if t.Speed < 0 {
		errs = append(errs, fmt.Errorf("speed must be ≥ 0, got %v", t.Speed))
	}
	return errors.Join(errs...)
}

// Validate checks the inventory's interval, /proc path and port range.
func (cc *ConnectionsConfig) Validate() error {
	var errs []error
	if cc.Interval <= 0 {
		errs = append(errs, fmt.Errorf("interval must be > 0, got %v", cc.Interval))
	}
	if cc.ProcPath == "" {
		errs = append(errs, errors.New("proc_path is required"))
	}
	if cc.EphemeralPorts != "" {
		if _, err := parseRange(cc.EphemeralPorts); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// points returns the capture points.
func (c *CaptureConfig) points() []CapturePoint {
	if len(c.Points) > 0 {
		return c.Points
	}
	return []CapturePoint{c.CapturePoint}
}

// Validate checks the capture points, framing, spans, routes and bounds.
func (c *CaptureConfig) Validate() error {
	var errs []error
	if len(c.Points) > 0 && (c.Interface != "" || c.NetworkNamespace != "" || len(c.Ports) > 0 || len(c.Hosts) > 0) {
		errs = append(errs, errors.New("set interface, network_namespace, ports and hosts either on capture or on each of its points"))
	}
	for i, p := range c.points() {
		if _, err := p.filterHosts(); err != nil {
			errs = append(errs, fmt.Errorf("points[%d]: %w", i, err))
		}
		if len(p.Ports)+len(p.Hosts) > bpffilter.MaxTerms {
			errs = append(errs, fmt.Errorf("points[%d]: at most %d ports and hosts", i, bpffilter.MaxTerms))
		}
	}
	if _, ok := parseFraming(c.Framing); !ok {
		errs = append(errs, fmt.Errorf("framing %q: want auto, http or generic", c.Framing))
	}
	if _, _, err := parseSpanKinds(c.Spans); err != nil {
		errs = append(errs, err)
	}
	if _, err := compileRoutes(c.Routes); err != nil {
		errs = append(errs, err)
	}
	for _, b := range []struct {
		name string
		v    int
		min  int
	}{{"snaplen", c.Snaplen, 128}, {"max_flows", c.MaxFlows, 1}, {"max_flow_buffer", c.MaxFlowBuffer, 1},
		{"max_buffer", c.MaxBuffer, 1}, {"max_header", c.MaxHeader, 256}, {"max_batch", c.MaxBatch, 1}} {
		if b.v < b.min {
			errs = append(errs, fmt.Errorf("%s must be ≥ %d, got %d", b.name, b.min, b.v))
		}
	}
	if c.SocketBuffer < 0 {
		errs = append(errs, fmt.Errorf("socket_buffer must be ≥ 0, got %d", c.SocketBuffer))
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"gap_timeout", c.GapTimeout}, {"idle_timeout", c.IdleTimeout}, {"quiet", c.Quiet}, {"flush_interval", c.FlushInterval}, {"reorder_window", c.ReorderWindow}} {
		if d.v <= 0 {
			errs = append(errs, fmt.Errorf("%s must be > 0, got %v", d.name, d.v))
		}
	}
	return errors.Join(errs...)
}

func (c *CapturePoint) filterHosts() ([]netip.Addr, error) {
	var out []netip.Addr
	for _, h := range c.Hosts {
		a, err := netip.ParseAddr(h)
		if err != nil {
			return nil, fmt.Errorf("hosts: %q is not an IP address", h)
		}
		out = append(out, a)
	}
	return out, nil
}

func parseSpanKinds(kinds []string) (client, server bool, err error) {
	for _, k := range kinds {
		switch k {
		case "client":
			client = true
		case "server":
			server = true
		default:
			return false, false, fmt.Errorf("spans: %q: want client or server", k)
		}
	}
	if !client && !server {
		return false, false, errors.New("spans: list client, server or both")
	}
	return client, server, nil
}

// Validate checks the log's path, service, format and routes.
func (a *AccessLogConfig) Validate() error {
	var errs []error
	if a.Path == "" {
		errs = append(errs, errors.New("path is required"))
	}
	if a.Service == "" {
		errs = append(errs, errors.New("service is required"))
	}
	if _, err := a.compile(); err != nil {
		errs = append(errs, err)
	}
	if _, err := compileRoutes(a.Routes); err != nil {
		errs = append(errs, err)
	}
	switch a.StartAt {
	case "", "end", "beginning":
	default:
		errs = append(errs, fmt.Errorf("start_at %q: want end or beginning", a.StartAt))
	}
	if a.PollInterval < 0 || a.MaxLineBytes < 0 {
		errs = append(errs, errors.New("poll_interval and max_line_bytes must be ≥ 0"))
	}
	return errors.Join(errs...)
}

func (a *AccessLogConfig) compile() (*accesslog.Format, error) {
	format := a.Format
	if format == "" {
		format = "nginx_timed"
	}
	if p, ok := accesslog.Presets[format]; ok {
		if a.LogFormat != "" {
			return nil, fmt.Errorf("format %s is a preset: leave log_format empty, or use format nginx or apache", format)
		}
		return accesslog.Compile(p.Style, p.Format)
	}
	var style accesslog.Style
	switch format {
	case "nginx":
		style = accesslog.Nginx
	case "apache":
		style = accesslog.Apache
	default:
		return nil, fmt.Errorf("format %q: want nginx_timed, apache_timed, nginx or apache", format)
	}
	if strings.TrimSpace(a.LogFormat) == "" {
		return nil, fmt.Errorf("format %s needs log_format", format)
	}
	return accesslog.Compile(style, a.LogFormat)
}
