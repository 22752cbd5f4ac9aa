package eim_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/eimhq/eim"
)

func TestTimeJSON(t *testing.T) {
	tm := eim.NewTime(time.Date(2026, 11, 21, 10, 0, 0, 123456789, time.FixedZone("x", 3600)))
	b, err := json.Marshal(tm)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(b), `"2026-11-21T09:00:00.123Z"`; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
	var back eim.Time
	if err := json.Unmarshal(b, &back); err != nil || !back.Equal(tm.Time) {
		t.Errorf("round trip: got %v (%v), want %v", back, err, tm)
	}
	if b, _ := json.Marshal(eim.Time{}); string(b) != "null" {
		t.Errorf("zero time: got %s, want null", b)
	}
	if err := json.Unmarshal([]byte(`"yesterday"`), &back); eim.ErrorCode(err) != eim.EINVALID {
		t.Errorf("bad time: got %v, want EINVALID", err)
	}
}

func TestMetadataInherit(t *testing.T) {
	parent := eim.Metadata{{Key: "zone", Value: "eu"}, {Key: "tier", Value: "gold"}}
	child := eim.Metadata{{Key: "tier", Value: "silver"}}
	got := child.Inherit(parent)
	want := eim.Metadata{{Key: "zone", Value: "eu"}, {Key: "tier", Value: "silver"}}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
}

func TestMetadataNilIsEmptyArray(t *testing.T) {
	b, err := json.Marshal(struct {
		M eim.Metadata `json:"m"`
	}{})
	if err != nil || string(b) != `{"m":[]}` {
		t.Errorf("got %s %v, want {\"m\":[]}", b, err)
	}
}
