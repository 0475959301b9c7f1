package plugin

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/grafana/grafana-plugin-sdk-go/backend"
	"github.com/grafana/grafana-plugin-sdk-go/data"
)

// The provisioned dashboard, as Grafana loads it.
const dashboardPath = "../../src/dashboards/overview.json"

type dashboard struct {
	Panels     []dashboardPanel `json:"panels"`
	Templating struct {
		List []dashboardVariable `json:"list"`
	} `json:"templating"`
}

type dashboardPanel struct {
	ID         int             `json:"id"`
	Title      string          `json:"title"`
	Type       string          `json:"type"`
	Datasource json.RawMessage `json:"datasource"`
	Targets    []struct {
		RefID     string `json:"refId"`
		QueryType string `json:"queryType"`
		PanelID   int    `json:"panelId"`
	} `json:"targets"`
	Options struct {
		FrameIndex *int `json:"frameIndex"`
	} `json:"options"`
}

type dashboardVariable struct {
	Name       string `json:"name"`
	Type       string `json:"type"`
	Query      any    `json:"query"`
	Sort       int    `json:"sort"`
	IncludeAll bool   `json:"includeAll"`
	AllValue   string `json:"allValue"`
}

func loadDashboard(t *testing.T) (dashboard, map[int][]json.RawMessage) {
	t.Helper()
	raw, err := os.ReadFile(dashboardPath)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("%s: %v", dashboardPath, err)
	}
	// The targets again, raw, to run them as Grafana sends them.
	var rawPanels struct {
		Panels []struct {
			ID      int               `json:"id"`
			Targets []json.RawMessage `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &rawPanels); err != nil {
		t.Fatal(err)
	}
	targets := map[int][]json.RawMessage{}
	for _, p := range rawPanels.Panels {
		targets[p.ID] = p.Targets
	}
	return d, targets
}

var variableRef = regexp.MustCompile(`\$\{(\w+)\}|\$(\w+)`)

func interpolate(s string, values map[string]string) string {
	return variableRef.ReplaceAllStringFunc(s, func(ref string) string {
		name := strings.Trim(ref, "${}")
		if v, ok := values[name]; ok {
			return v
		}
		return ref
	})
}

// resolveVariables sets the dashboard's variables as Grafana does on load:
// "All" where the variable offers it, else the first option of the catalog
// resource its query names, in the variable's sort order.
func resolveVariables(t *testing.T, ds *Datasource, d dashboard, tr backend.TimeRange) map[string]string {
	t.Helper()
	values := map[string]string{"datasource": "tierscope"}
	window := "?from=" + jsonInt(tr.From.Unix()) + "&to=" + jsonInt(tr.To.Unix())
	for _, v := range d.Templating.List {
		switch v.Type {
		case "datasource":
			continue
		case "query":
		default:
			t.Fatalf("variable %s is a %s, not fed from the catalog", v.Name, v.Type)
		}
		if v.IncludeAll {
			if v.AllValue != allValue {
				t.Fatalf("variable %s: allValue %q, the backend reads %q as no filter", v.Name, v.AllValue, allValue)
			}
			values[v.Name] = allValue
			continue
		}
		query, _ := v.Query.(string)
		fields := strings.Fields(interpolate(query, values))
		if len(fields) == 0 {
			t.Fatalf("variable %s has no query", v.Name)
		}
		url := fields[0] + window
		switch {
		case fields[0] == "services" && len(fields) == 2 && fields[1] == "versioned":
			url += "&versioned=true"
		case len(fields) > 1:
			url += "&service=" + strings.Join(fields[1:], " ")
		}
		status, options, body := callResource(t, ds, fields[0], url)
		if status != http.StatusOK {
			t.Fatalf("variable %s (%s): %d %s", v.Name, query, status, body)
		}
		var vals []string
		for _, o := range options {
			vals = append(vals, o.Value)
		}
		slices.Sort(vals)
		if v.Sort == 2 {
			slices.Reverse(vals)
		}
		values[v.Name] = ""
		if len(vals) > 0 {
			values[v.Name] = vals[0]
		}
	}
	return values
}

func jsonInt(v int64) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// notices gathers the notices of every frame.
func notices(frames data.Frames) []string {
	var out []string
	for _, f := range frames {
		if f.Meta != nil {
			for _, n := range f.Meta.Notices {
				out = append(out, n.Text)
			}
		}
	}
	return out
}

// checkDashboard runs every panel of the provisioned dashboard through the
// backend as Grafana would and checks that each shows data or says why not,
// in frames of the shape its panel type draws. It returns per panel title
// "data" or the notice.
func checkDashboard(t *testing.T, ds *Datasource, tr backend.TimeRange) map[string]string {
	t.Helper()
	d, rawTargets := loadDashboard(t)
	values := resolveVariables(t, ds, d, tr)
	t.Logf("variables: %v", values)

	answers := map[int]data.Frames{}
	outcome := map[string]string{}
	byID := map[int]dashboardPanel{}
	for _, p := range d.Panels {
		byID[p.ID] = p
	}
	seenQueries := map[string]string{}
	for _, p := range d.Panels {
		if strings.Contains(string(p.Datasource), "-- Dashboard --") {
			continue // after the panels it reuses
		}
		if len(p.Targets) != 1 {
			t.Fatalf("panel %q has %d queries", p.Title, len(p.Targets))
		}
		query := interpolate(string(rawTargets[p.ID][0]), values)
		key := p.Targets[0].QueryType + " " + query[strings.Index(query, `"queryType"`):]
		if other, dup := seenQueries[key]; dup {
			t.Errorf("panels %q and %q run the same query", other, p.Title)
		}
		seenQueries[key] = p.Title
		resp, err := ds.QueryData(context.Background(), &backend.QueryDataRequest{Queries: []backend.DataQuery{
			{RefID: "A", QueryType: p.Targets[0].QueryType, TimeRange: tr, JSON: json.RawMessage(query)},
		}})
		if err != nil {
			t.Fatal(err)
		}
		frames := mustSucceed(t, resp.Responses["A"])
		answers[p.ID] = frames
		checkPanelFrames(t, p, frames)
		outcome[p.Title] = panelOutcome(t, p.Title, frames)
	}
	for _, p := range d.Panels {
		if !strings.Contains(string(p.Datasource), "-- Dashboard --") {
			continue
		}
		source, ok := answers[p.Targets[0].PanelID]
		index := 0
		if p.Options.FrameIndex != nil {
			index = *p.Options.FrameIndex
		}
		if !ok || index >= len(source) {
			t.Fatalf("panel %q reuses panel %d, frame %d: not there", p.Title, p.Targets[0].PanelID, index)
		}
		frame := source[index]
		switch {
		case p.Type == "table" && frame.Name != "patterns":
			t.Errorf("panel %q shows frame %q of panel %q", p.Title, frame.Name, byID[p.Targets[0].PanelID].Title)
		case p.Type == "bargauge":
			if f, _ := frame.FieldByName("percent"); f == nil {
				t.Errorf("bar gauge %q reads frame %q, which has no percent", p.Title, frame.Name)
			}
		}
		outcome[p.Title] = panelOutcome(t, p.Title, data.Frames{frame})
	}
	if len(outcome) != len(d.Panels) {
		t.Errorf("%d panels checked of %d", len(outcome), len(d.Panels))
	}
	return outcome
}

func panelOutcome(t *testing.T, title string, frames data.Frames) string {
	t.Helper()
	if hasRows(frames) {
		return "data"
	}
	if n := notices(frames); len(n) > 0 {
		return "notice: " + n[0]
	}
	t.Errorf("panel %q has neither data nor a notice", title)
	return "blank"
}

// checkPanelFrames checks that frames have the shape the panel type draws.
func checkPanelFrames(t *testing.T, p dashboardPanel, frames data.Frames) {
	t.Helper()
	switch p.Type {
	case "nodegraph":
		var names []string
		for _, f := range frames {
			names = append(names, f.Name)
		}
		if !slices.Contains(names, nodesFrameName) || !slices.Contains(names, edgesFrameName) {
			t.Errorf("node graph %q got frames %v", p.Title, names)
		}
	case "table":
		if len(frames) != 1 && p.Options.FrameIndex == nil {
			t.Errorf("table %q got %d frames and shows the first", p.Title, len(frames))
		}
	case "trend":
		// The trend panel needs its x field, numeric and ascending, in every frame.
		for _, f := range frames {
			if f.Rows() == 0 {
				continue
			}
			x := f.Fields[0]
			for i := 1; i < x.Len(); i++ {
				if x.At(i).(float64) < x.At(i-1).(float64) {
					t.Errorf("trend %q: frame %q's %s is not ascending", p.Title, f.Name, x.Name)
				}
			}
		}
	case "timeseries":
		for _, f := range frames {
			if f.Rows() > 0 {
				if _, err := data.LongToWide(f, nil); f.TimeSeriesSchema().Type == data.TimeSeriesTypeNot && err != nil {
					t.Errorf("time series %q got frame %q without a time field", p.Title, f.Name)
				}
			}
		}
	}
}

// TestDashboardOnAFreshExporter: every panel of the provisioned dashboard,
// against a perfmodel exporter that has received nothing yet, shows a notice
// that says why it is empty, and none fails.
func TestDashboardOnAFreshExporter(t *testing.T) {
	live := startExporter(t, "sqlite://"+filepath.Join(t.TempDir(), "fresh.db"))
	ds, err := NewDatasourceForURL(live.baseURL+"/api/v1/", "")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	outcome := checkDashboard(t, ds, backend.TimeRange{From: now.Add(-time.Hour), To: now})
	for title, o := range outcome {
		t.Logf("%s: %s", title, o)
		if o == "data" {
			t.Errorf("panel %q has data on an empty exporter", title)
		}
	}
	if o := outcome["Experiments"]; !strings.Contains(o, "tierscope experiment start") {
		t.Errorf("the experiments panel does not say how to start one: %q", o)
	}
}
