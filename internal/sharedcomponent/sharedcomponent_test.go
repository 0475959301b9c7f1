package sharedcomponent

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componentstatus"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// counting is a component that counts its starts and shutdowns and
// reports a status from Start.
type counting struct {
	starts, shutdowns int
}

func (c *counting) Start(_ context.Context, host component.Host) error {
	c.starts++
	componentstatus.ReportStatus(host, componentstatus.NewEvent(componentstatus.StatusOK))
	return nil
}

func (c *counting) Shutdown(context.Context) error {
	c.shutdowns++
	return nil
}

// reportingHost records the status events it hears.
type reportingHost struct {
	component.Host
	events []componentstatus.Status
}

func (h *reportingHost) Report(ev *componentstatus.Event) { h.events = append(h.events, ev.Status()) }

func TestOneInstancePerKeyStartedOnceStoppedLast(t *testing.T) {
	reg := NewRegistry[string, *counting]()
	created := 0
	create := func() (*counting, error) { created++; return &counting{}, nil }
	traces, err := reg.GetOrCreate("perfmodel", create)
	require.NoError(t, err)
	metrics, err := reg.GetOrCreate("perfmodel", create)
	require.NoError(t, err)
	other, err := reg.GetOrCreate("perfmodel/2", create)
	require.NoError(t, err)
	require.Same(t, traces, metrics)
	require.NotSame(t, traces, other)
	require.Equal(t, 2, created)
	require.Equal(t, 2, reg.Len())

	ctx := context.Background()
	h1 := &reportingHost{Host: componenttest.NewNopHost()}
	h2 := &reportingHost{Host: componenttest.NewNopHost()}
	require.NoError(t, traces.Start(ctx, h1))
	require.NoError(t, metrics.Start(ctx, h2))
	c := traces.Unwrap()
	require.Equal(t, 1, c.starts, "started by the first pipeline only")
	require.Equal(t, []componentstatus.Status{componentstatus.StatusOK}, h1.events)

	require.NoError(t, traces.Shutdown(ctx))
	require.Zero(t, c.shutdowns, "the metrics pipeline still runs")
	require.Equal(t, 2, reg.Len())
	require.NoError(t, metrics.Shutdown(ctx))
	require.Equal(t, 1, c.shutdowns)
	require.NoError(t, metrics.Shutdown(ctx))
	require.Equal(t, 1, c.shutdowns, "shut down once")
	require.Equal(t, 1, reg.Len(), "left the registry")

	// Never started: shut down at once, and a later create builds anew.
	require.NoError(t, other.Shutdown(ctx))
	require.Equal(t, 1, other.Unwrap().shutdowns)
	require.Zero(t, reg.Len())
	again, err := reg.GetOrCreate("perfmodel", create)
	require.NoError(t, err)
	require.NotSame(t, traces, again)
}

// keepsHost keeps the host it was started with.
type keepsHost struct{ host component.Host }

func (k *keepsHost) Start(_ context.Context, host component.Host) error { k.host = host; return nil }
func (k *keepsHost) Shutdown(context.Context) error                     { return nil }

func TestLaterHostsHearStatus(t *testing.T) {
	reg := NewRegistry[string, *keepsHost]()
	s, err := reg.GetOrCreate("x", func() (*keepsHost, error) { return &keepsHost{}, nil })
	require.NoError(t, err)
	h1 := &reportingHost{Host: componenttest.NewNopHost()}
	h2 := &reportingHost{Host: componenttest.NewNopHost()}
	require.NoError(t, s.Start(context.Background(), h1))
	require.NoError(t, s.Start(context.Background(), h2))
	componentstatus.ReportStatus(s.Unwrap().host, componentstatus.NewRecoverableErrorEvent(errors.New("flush failed")))
	require.Equal(t, []componentstatus.Status{componentstatus.StatusRecoverableError}, h1.events)
	require.Equal(t, []componentstatus.Status{componentstatus.StatusRecoverableError}, h2.events)
	require.NoError(t, s.Shutdown(context.Background()))
	require.NoError(t, s.Shutdown(context.Background()))
}

func TestCreateErrorRegistersNothing(t *testing.T) {
	reg := NewRegistry[string, *counting]()
	_, err := reg.GetOrCreate("x", func() (*counting, error) { return nil, errors.New("bad config") })
	require.ErrorContains(t, err, "bad config")
	require.Zero(t, reg.Len())
}
