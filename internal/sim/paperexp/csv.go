package paperexp

import (
	"bufio"
	"io"
	"slices"
	"strconv"
)

// WriteCSV writes periods [from, to] (1-based indices, inclusive; 0 for to means
// the last) of a run as a work-factor samples CSV (docs/formats.md §5), with the
// process column when perProcess is set. Rows are ordered by period, machine,
// process and flow.
func WriteCSV(w io.Writer, run *Run, perProcess bool, from, to int) error {
	bw := bufio.NewWriter(w)
	if perProcess {
		bw.WriteString("period,machine,process,capacity_mhz,cpu_utilization,flow,rate\n")
	} else {
		bw.WriteString("period,machine,capacity_mhz,cpu_utilization,flow,rate\n")
	}
	if to == 0 {
		to = len(run.Periods)
	}
	f := func(x float64) string { return strconv.FormatFloat(x, 'g', 8, 64) }
	for _, p := range run.Periods[max(from, 1)-1 : min(to, len(run.Periods))] {
		obs := p.Machines
		if perProcess {
			obs = p.Processes
		}
		for _, o := range obs {
			flows := make([]string, 0, len(o.Rates))
			for fl := range o.Rates {
				flows = append(flows, fl)
			}
			slices.Sort(flows)
			for _, fl := range flows {
				bw.WriteString(strconv.FormatInt(p.Index, 10))
				bw.WriteByte(',')
				bw.WriteString(o.Machine)
				if perProcess {
					bw.WriteByte(',')
					bw.WriteString(o.Process)
				}
				bw.WriteString("," + f(o.CapacityMHz) + "," + f(o.Utilization) + "," + fl + "," + f(o.Rates[fl]) + "\n")
			}
		}
	}
	return bw.Flush()
}
