package causalpathprocessor

import (
	"context"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/processor"

	"github.com/tierscope/tierscope/internal/stitch"
	"github.com/tierscope/tierscope/processor/causalpathprocessor/internal/metadata"
)

// NewFactory returns the factory of the causalpath processor.
func NewFactory() processor.Factory {
	return processor.NewFactory(
		metadata.Type,
		createDefaultConfig,
		processor.WithTraces(createTracesProcessor, metadata.TracesStability))
}

func createDefaultConfig() component.Config {
	def := stitch.DefaultOptions()
	return &Config{
		Mode:          def.Mode.String(),
		Wait:          10 * time.Second,
		MaxSpans:      100_000,
		MaxBytes:      256 << 20,
		SkewWindow:    def.Config.SkewWindow,
		MaxSkew:       def.Config.MaxSkew,
		LocalWindow:   def.Config.LocalWindow,
		AsyncWindow:   def.Config.AsyncWindow,
		TagPaths:      true,
		MaxAddresses:  def.MaxAddresses,
		MinConfidence: def.MinConfidence,
	}
}

func createTracesProcessor(_ context.Context, set processor.Settings, cfg component.Config, next consumer.Traces) (processor.Traces, error) {
	return newProcessor(set, cfg.(*Config), next)
}
