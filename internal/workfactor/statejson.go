package workfactor

import (
	"encoding/json"
	"fmt"
)

// The JSON form of a state. Up to version 3 it was the struct's own fields,
// each held or trail equation an object with its flows by name. Version 4
// stores each source's held, recent and trail equations as columns (one
// array per field) and names their flows by index: into Flows, then into
// RowFlows for flows an equation still holds but the state no longer
// tracks (evicted). The equations are most of a state, and their keys and
// names most of their JSON. Versions 1–3 still load.

// stateFields and sourceFields are State and SourceState without their
// methods, for encoding/json.
type (
	stateFields  State
	sourceFields SourceState
)

type stateJSON struct {
	stateFields
	Sources  []sourceJSON `json:"sources"`
	RowFlows []string     `json:"row_flows,omitempty"`
}

type sourceJSON struct {
	sourceFields
	Held   *rowColumns `json:"held,omitempty"`
	Recent *rowColumns `json:"recent,omitempty"`
	Trail  *rowColumns `json:"trail,omitempty"`
}

// rowColumns holds equations column by column: row i is Period[i], Y[i], ...;
// Flows[i] are indices (stateJSON) and Rates[i] the rates of those flows.
// Weight is the trail's only.
type rowColumns struct {
	Period []int64     `json:"period"`
	Y      []float64   `json:"y"`
	V      []float64   `json:"v"`
	Flows  [][]int     `json:"flows"`
	Rates  [][]float64 `json:"rates"`
	Resid  []float64   `json:"resid"`
	Scale  []float64   `json:"scale"`
	Weight []float64   `json:"weight,omitempty"`
}

// MarshalJSON encodes the state as version 4 (see above).
func (s State) MarshalJSON() ([]byte, error) {
	idx := rowFlowIndex(&s)
	out := stateJSON{stateFields: stateFields(s), RowFlows: idx.extra}
	out.Version = stateVersion
	out.Sources = make([]sourceJSON, len(s.Sources))
	for i, src := range s.Sources {
		out.Sources[i] = sourceJSON{
			sourceFields: sourceFields(src),
			Held:         idx.columns(src.Held, nil),
			Recent:       idx.columns(src.Recent, nil),
			Trail:        idx.trailColumns(src.Trail),
		}
	}
	return json.Marshal(out)
}

// UnmarshalJSON decodes any version; versions 1–3 keep their number, as
// before (Restore and MarshalBinary accept them).
func (s *State) UnmarshalJSON(b []byte) error {
	var head struct {
		Version int `json:"version"`
	}
	if err := json.Unmarshal(b, &head); err != nil {
		return err
	}
	if head.Version < 4 {
		var t stateFields
		if err := json.Unmarshal(b, &t); err != nil {
			return err
		}
		*s = State(t)
		return nil
	}
	if head.Version > stateVersion {
		return fmt.Errorf("state version %d, want %d", head.Version, stateVersion)
	}
	var in stateJSON
	if err := json.Unmarshal(b, &in); err != nil {
		return err
	}
	t := State(in.stateFields)
	names := append(append([]string(nil), t.Flows...), in.RowFlows...)
	t.Sources = make([]SourceState, len(in.Sources))
	for i, src := range in.Sources {
		ss := SourceState(src.sourceFields)
		var err error
		if ss.Held, err = src.Held.rows(names); err != nil {
			return err
		}
		if ss.Recent, err = src.Recent.rows(names); err != nil {
			return err
		}
		if ss.Trail, err = src.Trail.trail(names); err != nil {
			return err
		}
		t.Sources[i] = ss
	}
	*s = t
	return nil
}

// flowIndex numbers the flows of a state's equations: its Flows first, then
// the names only equations hold (extra), in the order met.
type flowIndex struct {
	of    map[string]int
	extra []string
}

func rowFlowIndex(s *State) *flowIndex {
	x := &flowIndex{of: make(map[string]int, len(s.Flows))}
	for i, f := range s.Flows {
		x.of[f] = i
	}
	note := func(rows []HeldRow) {
		for _, r := range rows {
			for _, f := range r.Flows {
				if _, ok := x.of[f]; !ok {
					x.of[f] = len(x.of)
					x.extra = append(x.extra, f)
				}
			}
		}
	}
	for _, src := range s.Sources {
		note(src.Held)
		note(src.Recent)
		for _, t := range src.Trail {
			note([]HeldRow{t.HeldRow})
		}
	}
	return x
}

// columns lays rows out as columns (nil for no rows); weights, when not
// nil, is the trail's.
func (x *flowIndex) columns(rows []HeldRow, weights []float64) *rowColumns {
	if len(rows) == 0 {
		return nil
	}
	c := &rowColumns{Weight: weights}
	for _, r := range rows {
		fl := make([]int, len(r.Flows))
		for j, f := range r.Flows {
			fl[j] = x.of[f]
		}
		c.Period = append(c.Period, r.Period)
		c.Y = append(c.Y, r.Y)
		c.V = append(c.V, r.V)
		c.Flows = append(c.Flows, fl)
		c.Rates = append(c.Rates, r.Rates)
		c.Resid = append(c.Resid, r.Resid)
		c.Scale = append(c.Scale, r.Scale)
	}
	return c
}

func (x *flowIndex) trailColumns(trail []TrailRow) *rowColumns {
	rows := make([]HeldRow, len(trail))
	weights := make([]float64, len(trail))
	for i, t := range trail {
		rows[i], weights[i] = t.HeldRow, t.Weight
	}
	return x.columns(rows, weights)
}

// rows reads the columns back, the flows' names from names.
func (c *rowColumns) rows(names []string) ([]HeldRow, error) {
	if c == nil {
		return nil, nil
	}
	n := len(c.Period)
	if len(c.Y) != n || len(c.V) != n || len(c.Flows) != n || len(c.Rates) != n || len(c.Resid) != n || len(c.Scale) != n {
		return nil, fmt.Errorf("state: equation columns of different lengths")
	}
	rows := make([]HeldRow, n)
	for i := range rows {
		fl := make([]string, len(c.Flows[i]))
		for j, k := range c.Flows[i] {
			if k < 0 || k >= len(names) {
				return nil, fmt.Errorf("state: equation flow index %d out of range", k)
			}
			fl[j] = names[k]
		}
		rows[i] = HeldRow{Period: c.Period[i], Y: c.Y[i], V: c.V[i], Flows: fl, Rates: c.Rates[i], Resid: c.Resid[i], Scale: c.Scale[i]}
	}
	return rows, nil
}

func (c *rowColumns) trail(names []string) ([]TrailRow, error) {
	rows, err := c.rows(names)
	if err != nil || rows == nil {
		return nil, err
	}
	if len(c.Weight) != len(rows) {
		return nil, fmt.Errorf("state: trail weights disagree with the trail")
	}
	out := make([]TrailRow, len(rows))
	for i, r := range rows {
		out[i] = TrailRow{HeldRow: r, Weight: c.Weight[i]}
	}
	return out, nil
}
