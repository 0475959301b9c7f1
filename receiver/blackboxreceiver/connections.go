package blackboxreceiver

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.uber.org/zap"

	"github.com/tierscope/tierscope/receiver/blackboxreceiver/internal/metadata"
	"github.com/tierscope/tierscope/receiver/blackboxreceiver/internal/nsenter"
	"github.com/tierscope/tierscope/receiver/blackboxreceiver/internal/procnet"
)

// Link metric and its attributes.
const (
	metricLinkConnections = "tierscope.link.connections"
	attrSourcePID         = "tierscope.source.pid"
	attrSourceProcess     = "tierscope.source.process"
	attrSourceService     = "tierscope.source.service"
	attrDestPID           = "tierscope.destination.pid"
	attrDestProcess       = "tierscope.destination.process"
	attrDestService       = "tierscope.destination.service"
)

// connectionsSource is the connection inventory (paper 000 §3): every
// interval, the established TCP connections of a network namespace, folded
// into links with their processes and ephemeral ports zeroed, as the gauge
// tierscope.link.connections (open connections per link).
type connectionsSource struct {
	cfg    *ConnectionsConfig
	svc    *services
	next   consumer.Metrics
	tb     *metadata.TelemetryBuilder
	logger *zap.Logger
	cancel context.CancelFunc
	done   chan struct{}
}

func (s *connectionsSource) start() error {
	if _, err := s.scan(); err != nil {
		return fmt.Errorf("blackbox connections: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel, s.done = cancel, make(chan struct{})
	go func() {
		defer close(s.done)
		t := time.NewTicker(s.cfg.Interval)
		defer t.Stop()
		for {
			s.collect(ctx)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return nil
}

func (s *connectionsSource) collect(ctx context.Context) {
	links, err := s.scan()
	if err != nil {
		s.logger.Warn("connection inventory failed", zap.Error(err))
		return
	}
	s.tb.ReceiverBlackboxLinks.Record(ctx, int64(len(links)))
	if err := s.next.ConsumeMetrics(ctx, s.metrics(links, time.Now())); err != nil {
		s.logger.Debug("next consumer refused link metrics", zap.Error(err))
	}
}

// scan reads the TCP tables (of the configured namespace), the socket owners
// and the ephemeral range, and folds them into links.
func (s *connectionsSource) scan() ([]procnet.LinkCount, error) {
	var socks []procnet.Socket
	var rangeText string
	err := nsenter.Do(s.cfg.NetworkNamespace, func() error {
		netDir := filepath.Join(s.cfg.ProcPath, "net")
		sysctl := filepath.Join(s.cfg.ProcPath, "sys/net/ipv4/ip_local_port_range")
		if s.cfg.NetworkNamespace != "" {
			// This thread's namespace, not the process's.
			netDir = "/proc/thread-self/net"
			sysctl = "/proc/sys/net/ipv4/ip_local_port_range"
		}
		found := false
		for _, name := range []string{"tcp", "tcp6"} {
			f, err := os.Open(filepath.Join(netDir, name))
			if err != nil {
				continue // no IPv6 in this kernel or namespace
			}
			ss, _, err := procnet.ParseTCP(f)
			_ = f.Close()
			if err != nil {
				return err
			}
			found = true
			socks = append(socks, ss...)
		}
		if !found {
			return errors.New("no TCP table under " + netDir)
		}
		if b, err := os.ReadFile(sysctl); err == nil {
			rangeText = string(b)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	eph := procnet.PortRange{Lo: 32768, Hi: 60999} // Linux's default
	if s.cfg.EphemeralPorts != "" {
		eph, _ = parseRange(s.cfg.EphemeralPorts)
	} else if r, err := procnet.ParsePortRange(rangeText); err == nil {
		eph = r
	}
	owners, err := procnet.SocketOwners(os.DirFS(s.cfg.ProcPath), s.cfg.MaxProcesses)
	if err != nil {
		return nil, err
	}
	return procnet.Links(socks, owners, eph), nil
}

func (s *connectionsSource) metrics(links []procnet.LinkCount, now time.Time) pmetric.Metrics {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	ra := rm.Resource().Attributes()
	if h, err := os.Hostname(); err == nil {
		ra.PutStr("host.name", h)
	}
	ra.PutStr(attrSource, "connections")
	if s.cfg.NetworkNamespace != "" {
		ra.PutStr("tierscope.network_namespace", s.cfg.NetworkNamespace)
	}
	sm := rm.ScopeMetrics().AppendEmpty()
	sm.Scope().SetName(scopeName)
	m := sm.Metrics().AppendEmpty()
	m.SetName(metricLinkConnections)
	m.SetDescription("Open TCP connections per communication link: source and destination node (address, process) and port, the client's ephemeral port as 0.")
	m.SetUnit("{connections}")
	dps := m.SetEmptyGauge().DataPoints()
	ts := pcommon.NewTimestampFromTime(now)
	for _, l := range links {
		dp := dps.AppendEmpty()
		dp.SetTimestamp(ts)
		dp.SetIntValue(int64(l.Connections))
		a := dp.Attributes()
		a.PutStr("network.transport", "tcp")
		if l.Destination.Addr().Is4() {
			a.PutStr("network.type", "ipv4")
		} else {
			a.PutStr("network.type", "ipv6")
		}
		a.PutStr("source.address", l.Source.Addr().String())
		a.PutInt("source.port", int64(l.Source.Port()))
		a.PutStr("destination.address", l.Destination.Addr().String())
		a.PutInt("destination.port", int64(l.Destination.Port()))
		if l.SourcePID > 0 {
			a.PutInt(attrSourcePID, int64(l.SourcePID))
			a.PutStr(attrSourceProcess, l.SourceComm)
		}
		if l.DestinationPID > 0 {
			a.PutInt(attrDestPID, int64(l.DestinationPID))
			a.PutStr(attrDestProcess, l.DestComm)
		}
		if n := s.svc.host(l.Source.Addr()); n.named {
			a.PutStr(attrSourceService, n.service)
		}
		if n := s.svc.server(l.Destination); n.named {
			a.PutStr(attrDestService, n.service)
		}
	}
	return md
}

func (s *connectionsSource) shutdown(ctx context.Context) error {
	if s.cancel == nil {
		return nil
	}
	s.cancel()
	select {
	case <-s.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
