package main

import (
	"testing"

	"github.com/cocoonstack/sandbox-operator/tools/scale/writecount"
)

func TestTargetRows(t *testing.T) {
	pod := &PathResults{Path: "pod", Phases: []Phase{
		{Name: "one", Count: 20, P50: 0.040, AckSeconds: []float64{0.006}, AckP50: 0.006, EtcdPutsPer: 30},
		{Name: "burst", Count: 100, P50: 2.0, AckSeconds: []float64{0.1}, AckP50: 0.1, EtcdPutsPer: 10},
		{Name: "list", Count: 10, P50: 0.1},
	}}
	ours := &PathResults{Path: "ours", Phases: []Phase{
		{Name: "one", Count: 20, P50: 0.008, AckSeconds: []float64{0.006}, AckP50: 0.006, EtcdPutsPer: 4,
			Writes: writecount.WriteCounts{APIWritesByResource: map[string]float64{"configmaps": 20, "nodeinventories": 40}}},
		{Name: "burst", Count: 100, P50: 0.05, AckSeconds: []float64{0.05}, AckP50: 0.05, EtcdPutsPer: 0},
		{Name: "list", Count: 10, P50: 0.01},
	}}
	rows := targetRows(pod, ours)
	if len(rows) != 2 {
		t.Fatalf("%d rows, want the two create steps: %+v", len(rows), rows)
	}
	one, burst := rows[0], rows[1]
	if one.step != "one" || one.latencyRatio != 5 || one.etcdRatio != 7.5 || one.ackShare != 0.75 {
		t.Errorf("one at a time: %+v", one)
	}
	if got := writesByResource(one.writesPer); got != "configmaps 1.00, nodeinventories 2.00" {
		t.Errorf("writes per sandbox %q", got)
	}
	if verdict(one.latencyRatio, targetLatencyRatio, false) != "missed" || verdict(one.etcdRatio, targetEtcdRatio, true) != "missed" {
		t.Error("5× and 7.5× met a 20× and a 50× target")
	}
	if burst.latencyRatio != 40 || verdict(burst.latencyRatio, targetLatencyRatio, false) != "met" {
		t.Errorf("burst latency %v", burst.latencyRatio)
	}
	// No etcd put at all on this side meets the etcd target.
	if burst.etcdRatio != 0 || verdict(burst.etcdRatio, targetEtcdRatio, true) != "met" {
		t.Errorf("burst etcd ratio %v", burst.etcdRatio)
	}
	if writesByResource(burst.writesPer) != "none" {
		t.Errorf("burst writes %q", writesByResource(burst.writesPer))
	}
}
