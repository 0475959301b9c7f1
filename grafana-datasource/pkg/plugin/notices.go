package plugin

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/grafana/grafana-plugin-sdk-go/data"

	"github.com/tierscope/tierscope/internal/api"
)

// startExperimentHint tells an operator how to obtain gradients.
const startExperimentHint = "start an experiment with `tierscope experiment start --element 'link:<caller>-><callee>' --wait` " +
	"(or POST /api/v1/experiments); the Experiments panel follows its progress"

// emptyReasons says, per query type, why a fresh deployment has nothing to
// show yet and what makes it appear.
var emptyReasons = map[string]string{
	QueryTypePaths: "no causal paths in this time range: the perfmodel exporter has received no complete traces in it " +
		"(spans reach it through the collector's traces pipeline; a trace counts once trace_wait has passed)",
	QueryTypeGraph: "no services in this time range: the perfmodel exporter has received no spans in it " +
		"(spans reach it through the collector's traces pipeline)",
	QueryTypeWorkFactors: "no work factors in this time range: they need CPU utilization (hostmetrics system.cpu.utilization, " +
		"or process metrics) keyed by the same host.name as the spans, the CPU capacity (hostmetrics system.cpu.frequency, " +
		"or the exporter's capacity_mhz), and several windows whose request mix varies",
	QueryTypeSignatures: "no signatures in this time range: a signature needs requests at the front service over several windows " +
		"whose CPU utilization (hostmetrics) spreads over enough utilization buckets",
	QueryTypeGradients:   "no gradients measured yet: " + startExperimentHint,
	QueryTypeExperiments: "no experiments yet: " + startExperimentHint,
	QueryTypePredict:     "no prediction: the what-if needs a gradient measured on the changed element; " + startExperimentHint,
	QueryTypeProfile: "no signature profile in this time range: a profile needs requests at the front service over several windows " +
		"whose CPU utilization (hostmetrics) spreads over utilization buckets",
	QueryTypeSpectrum: "no experiment yet, so no spectrum: " + startExperimentHint,
	QueryTypeLatency: "no requests in this time range: the perfmodel exporter has received no complete traces in it " +
		"(spans reach it through the collector's traces pipeline; a trace counts once trace_wait has passed)",
}

// addNotice attaches an informational notice to frame, which Grafana shows
// on the panel.
func addNotice(frame *data.Frame, text string) {
	if frame.Meta == nil {
		frame.Meta = &data.FrameMeta{}
	}
	frame.Meta.Notices = append(frame.Meta.Notices, data.Notice{Severity: data.NoticeSeverityInfo, Text: text})
}

// hasRows is true when any frame holds a row.
func hasRows(frames data.Frames) bool {
	for _, f := range frames {
		if n, err := f.RowLen(); err == nil && n > 0 {
			return true
		}
	}
	return false
}

// explainEmpty gives an empty answer a notice saying why it is empty, so that
// no panel of a fresh deployment is blank without a word.
func explainEmpty(queryType string, frames data.Frames) data.Frames {
	if hasRows(frames) {
		return frames
	}
	reason, ok := emptyReasons[queryType]
	if !ok {
		return frames
	}
	if len(frames) == 0 {
		frames = data.Frames{data.NewFrame(queryType)}
	}
	// On every frame: a panel may show any one of them (a table's frameIndex).
	for _, f := range frames {
		addNotice(f, reason)
	}
	return frames
}

// noticeFrame is an empty frame of the given name carrying one notice.
func noticeFrame(name, executedQuery, text string) data.Frames {
	frame := data.NewFrame(name)
	frame.Meta = tableMeta(executedQuery)
	addNotice(frame, text)
	return data.Frames{frame}
}

// compareNotice explains a comparison that cannot be made from what the
// catalog holds (no service chosen, fewer than two versions, the same version
// twice); it is empty when the comparison can be asked for.
func compareNotice(ctx context.Context, client *APIClient, model QueryModel) string {
	service := strings.TrimSpace(model.Service)
	base, candidate := strings.TrimSpace(model.BaseVersion), strings.TrimSpace(model.CandidateVersion)
	if service != "" && base != "" && candidate != "" && base != candidate {
		return ""
	}
	if service == "" {
		return "no service to compare: no service has two versions (the resource attribute service.version) in the last hour; " +
			"deploy a candidate version beside or after the base, or choose a service in the query"
	}
	var versions []string
	var catalog api.Catalog
	if err := client.get(ctx, api.PathCatalog, nil, &catalog); err == nil {
		for _, s := range catalog.Services {
			if s.Name == service {
				versions = s.Versions
			}
		}
	}
	switch {
	case len(versions) < 2:
		seen := "no version"
		if len(versions) == 1 {
			seen = "only version " + versions[0]
		}
		return fmt.Sprintf("%s has %s in the last hour: a comparison needs two versions (the resource attribute service.version); "+
			"deploy the candidate beside or after the base and compare them here", service, seen)
	case base == "" || candidate == "":
		return fmt.Sprintf("choose a base and a candidate version of %s (seen: %s)", service, strings.Join(versions, ", "))
	default:
		return fmt.Sprintf("the base and the candidate are the same version (%s); choose two of %s (seen: %s)",
			base, service, strings.Join(versions, ", "))
	}
}

// modelNotYetAvailable is true for API answers that mean "the model cannot
// answer this yet" (no signature of a version, no gradient on an element)
// rather than a fault: they become notices, not errors.
func modelNotYetAvailable(err error) (string, bool) {
	var apiErr *APIError
	if errors.As(err, &apiErr) && (apiErr.Status == http.StatusNotFound || apiErr.Status == http.StatusUnprocessableEntity) {
		return apiErr.Message, true
	}
	return "", false
}
