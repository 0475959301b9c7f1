package causalpathprocessor

import (
	"errors"
	"fmt"
	"time"

	"github.com/tierscope/tierscope/internal/stitch"
)

// Config is the configuration of the causalpath processor.
type Config struct {
	// Mode is how an inferred parent is written: reparent (default), link or
	// annotate (docs/formats.md §4).
	Mode string `mapstructure:"mode"`
	// Wait is how long a span is held for its parent and siblings to arrive.
	Wait time.Duration `mapstructure:"wait"`
	// MaxSpans bounds the buffer. When it is full the oldest spans are released
	// without inference, and counted.
	MaxSpans int `mapstructure:"max_spans"`
	// MaxBytes bounds the buffer by the spans' OTLP size: past it the oldest
	// leave early as past max_spans; a batch larger alone passes unstitched.
	MaxBytes int64 `mapstructure:"max_bytes"`
	// SkewWindow is the clock difference tolerated between processes.
	SkewWindow time.Duration `mapstructure:"skew_window"`
	// MaxSkew is the largest clock difference searched for between two
	// processes; a pair measured beyond skew_window/2 is matched around its
	// measured offset. 0 searches no further than skew_window.
	MaxSkew time.Duration `mapstructure:"max_skew"`
	// LocalWindow is the timestamp rounding tolerated within one process; 0
	// learns it from each process's timestamps.
	LocalWindow time.Duration `mapstructure:"local_window"`
	// AsyncWindow is the longest delay from a PRODUCER span to its CONSUMER span.
	AsyncWindow time.Duration `mapstructure:"async_window"`
	// TagPaths writes tierscope.path.signature on every span.
	TagPaths bool `mapstructure:"tag_paths"`
	// MaxAddresses bounds the learned map from addresses to services.
	MaxAddresses int `mapstructure:"max_addresses"`
	// MinConfidence is the confidence from which reparent mode writes an
	// inferred parent; below it the span gets a link to its best candidate.
	MinConfidence float64 `mapstructure:"min_confidence"`
}

// Validate checks the configuration.
func (c *Config) Validate() error {
	var errs []error
	if _, err := stitch.ParseMode(c.Mode); err != nil {
		errs = append(errs, fmt.Errorf("mode: %w", err))
	}
	if c.Wait <= 0 {
		errs = append(errs, fmt.Errorf("wait must be > 0, got %v", c.Wait))
	}
	if c.MaxSpans <= 0 {
		errs = append(errs, fmt.Errorf("max_spans must be > 0, got %d", c.MaxSpans))
	}
	if c.MaxBytes <= 0 {
		errs = append(errs, fmt.Errorf("max_bytes must be > 0, got %d", c.MaxBytes))
	}
	if c.SkewWindow < 0 || c.MaxSkew < 0 || c.LocalWindow < 0 || c.AsyncWindow < 0 {
		errs = append(errs, errors.New("skew_window, max_skew, local_window and async_window must be ≥ 0"))
	}
	if !(c.MinConfidence >= 0 && c.MinConfidence <= 1) {
		errs = append(errs, fmt.Errorf("min_confidence must be in [0, 1], got %v", c.MinConfidence))
	}
	if c.MaxAddresses < 0 {
		errs = append(errs, fmt.Errorf("max_addresses must be ≥ 0, got %d", c.MaxAddresses))
	}
	return errors.Join(errs...)
}

func (c *Config) stitchOptions() stitch.Options {
	opt := stitch.DefaultOptions()
	opt.Mode, _ = stitch.ParseMode(c.Mode)
	opt.TagPaths = c.TagPaths
	opt.Patterns = false
	// Remember as many released spans as the buffer holds: enough for the callee
	// side of a call released a round after its caller.
	opt.MaxHistory = c.MaxSpans
	opt.HistoryWindow = c.Wait
	opt.MaxAddresses = c.MaxAddresses
	opt.MinConfidence = c.MinConfidence
	opt.Config.SkewWindow = c.SkewWindow
	opt.Config.MaxSkew = c.MaxSkew
	opt.Config.LocalWindow = c.LocalWindow
	opt.Config.AsyncWindow = c.AsyncWindow
	return opt
}
