package stitcheval

import (
	"testing"

	"github.com/tierscope/tierscope/internal/stitch"
)

// A tenth of the spans dropped, the hops between services broken, local
// context intact: a local span that lost its parent lost it with the parent
// span, and its true parent (an ancestor, often in another process) is not a
// candidate. Such spans must stay unwritten rather than go to another request.
func TestDroppedParentsStayUnwritten(t *testing.T) {
	p := DefaultParams()
	p.Drop = 0.1
	runs, err := RunOne(SyntheticScenario("drops", "s", 4, p, StripCrossProcess), []Algorithm{{"stitch", Stitcher(stitch.DefaultOptions())}}, 1)
	if err != nil {
		t.Fatal(err)
	}
	sc := runs[0].Scores
	t.Logf("10%% of spans dropped, hops broken: %.3f / %.4f (accuracy / precision)", sc.Accuracy, sc.Precision)
	if sc.Precision < 0.975 {
		t.Errorf("precision %.4f, want ≥ 0.975", sc.Precision)
	}
}
