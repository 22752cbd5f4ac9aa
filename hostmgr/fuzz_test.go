package hostmgr

import (
	"reflect"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/hwlimit"
	hostv1 "github.com/eimhq/eim/proto/eim/host/v1"
)

// FuzzHardware: any hardware message is refused by checkHardware or
// applied without a panic; canonical is idempotent (one digest per
// machine), and applying the same report twice changes nothing the
// second time.
func FuzzHardware(f *testing.F) {
	seed := &hostv1.Hardware{
		Cpu:  &hostv1.Cpu{Model: "m", Cores: 2, Threads: 4, Capabilities: []string{"b", "a", "b"}},
		Nics: []*hostv1.Nic{{DeviceName: "eth0", IpAddresses: []*hostv1.IpAddress{{Address: "192.0.2.1/24"}, {Address: "192.0.2.1/24"}}}, {DeviceName: "eth0"}},
		Usbs: []*hostv1.Usb{{Bus: 1, Addr: 2}, {Bus: 1, Addr: 2}},
	}
	b, _ := proto.Marshal(seed)
	f.Add(b)
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		var hw hostv1.Hardware
		if proto.Unmarshal(data, &hw) != nil || hwlimit.Validate(&hw) != nil {
			return
		}
		c := canonical(&hw)
		d := hardwareDigest(c)
		if d2 := hardwareDigest(canonical(c)); d2 != d {
			t.Fatalf("canonical is not idempotent: %s, then %s", d, d2)
		}
		now := eim.NewTime(time.Unix(1_790_000_000, 0))
		h := &eim.Host{}
		applyHardware(h, c, d, now)
		first := *h
		applyHardware(h, c, d, eim.NewTime(time.Unix(1_790_000_100, 0)))
		if !reflect.DeepEqual(first, *h) {
			t.Fatalf("the same report applied twice changed the host:\n%+v\n%+v", first, *h)
		}
	})
}
