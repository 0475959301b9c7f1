package owner

import (
	"fmt"
	"os"
	"os/exec"
	"testing"
)

func TestSelfIsAliveAndADeadChildIsNot(t *testing.T) {
	if !Alive(Self()) {
		t.Fatalf("Self() %q is not alive", Self())
	}
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	st, err := startTime(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	child := fmt.Sprintf("p%ds%d", cmd.Process.Pid, st)
	if !Alive(child) {
		t.Errorf("running child %s not alive", child)
	}
	// Same pid, another start time: a reused pid is not the owner.
	if Alive(fmt.Sprintf("p%ds%d", cmd.Process.Pid, st+1)) {
		t.Error("a pid with another start time counts as alive")
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	if Alive(child) {
		t.Errorf("killed child %s still alive", child)
	}
	for _, bad := range []string{"", "x", "p12", "12x3", "p1s2-extra"} {
		if Alive(bad) {
			t.Errorf("Alive(%q) = true", bad)
		}
	}
	if id, ok := Parse(Self() + "-abc"); !ok || id != Self() {
		t.Errorf("Parse: %q %v", id, ok)
	}
	if _, ok := Parse(fmt.Sprintf("%dx1", os.Getpid())); ok {
		t.Error("a legacy id parsed as an owner")
	}
}
