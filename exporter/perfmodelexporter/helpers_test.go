package perfmodelexporter

import (
	"context"

	"github.com/tierscope/tierscope/exporter/perfmodelexporter/internal/timegrid"
)

// The engine's parts, as the tests drive them.

// hourBlock is an hour in seconds: the read side's cache and rollup block.
const hourBlock = 3600

func alignDown(t, r int64) int64 { return timegrid.AlignDown(t, r) }

// completeAll adds every trace being assembled to the model now.
func (e *engine) completeAll() { e.ingest.CompleteAll() }

// flush writes the open windows to the store (and closes them all when final).
func (e *engine) flush(ctx context.Context, final bool) error { return e.ingest.Flush(ctx, final) }

func deref(p *float64) float64 {
	if p == nil {
		return 0
	}
	return *p
}
