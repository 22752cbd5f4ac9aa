package ipmi

import (
	"strings"
	"testing"
)

// bootParam5 is ipmitool's answer to "chassis bootparam get 5", as it
// prints it for ipmi_sim (a one-time PXE boot, the valid bit unset).
const bootParam5 = `Boot parameter version: 1
Boot parameter 5 is valid/unlocked
Boot parameter data: 0004000000
 Boot Flags :
   - Boot Flag Invalid
   - Options apply to only next boot
   - BIOS PC Compatible (legacy) boot 
   - Boot Device Selector : Force PXE
   - BIOS verbosity : System Default
   - Console Redirection control : Console redirection occurs per BIOS configuration setting (default)
   - BIOS Mux Control Override : BIOS uses recommended setting of the mux at the end of POST
`

func TestParseBootFlags(t *testing.T) {
	persistentEFI := strings.NewReplacer(
		"Boot Flag Invalid", "Boot Flag Valid",
		"Options apply to only next boot", "Options apply to all future boots",
		"BIOS PC Compatible (legacy) boot", "BIOS EFI boot",
		"Force PXE", "Force Boot from default Hard-Drive",
	).Replace(bootParam5)
	for _, c := range []struct {
		name, out string
		want      Boot
		wantErr   bool
	}{
		{"ipmi_sim pxe once", bootParam5, Boot{Device: BootPXE, Once: true}, false},
		{"disk persistent efi valid", persistentEFI, Boot{Device: BootDisk, UEFI: true, Valid: true}, false},
		{"cdrom", strings.Replace(bootParam5, "Force PXE", "Force Boot from CD/DVD", 1), Boot{Device: BootCDROM, Once: true}, false},
		{"bios", strings.Replace(bootParam5, "Force PXE", "Force Boot into BIOS Setup", 1), Boot{Device: BootBIOS, Once: true}, false},
		{"other", strings.Replace(bootParam5, "Force PXE", "Force Boot from primary remote media", 1), Boot{Device: "other: Force Boot from primary remote media", Once: true}, false},
		{"empty", "", Boot{}, true},
		{"no selector", "   - Options apply to only next boot\n", Boot{}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := parseBootFlags(c.out)
			if (err != nil) != c.wantErr {
				t.Fatalf("error: got %v, want error %v", err, c.wantErr)
			}
			if got != c.want {
				t.Fatalf("got %+v, want %+v", got, c.want)
			}
		})
	}
}

func TestParsePowerStatus(t *testing.T) {
	for _, c := range []struct {
		out    string
		want   PowerState
		wantOK bool
	}{
		{"Chassis Power is on\n", On, true},
		{"Chassis Power is off\n", Off, true},
		{"Chassis Power is unknown\n", Off, false},
		{"", Off, false},
	} {
		got, ok := parsePowerStatus(c.out)
		if got != c.want || ok != c.wantOK {
			t.Errorf("%q: got %v %v, want %v %v", c.out, got, ok, c.want, c.wantOK)
		}
	}
}

// TestClassify: ipmitool -v's error output, as it prints it for each
// failure against ipmi_sim.
func TestClassify(t *testing.T) {
	for _, c := range []struct {
		name, stderr string
		want         Kind
		detail       string
	}{
		{"wrong password", "Loading IANA PEN Registry...\n> RAKP 2 HMAC is invalid\nError: Unable to establish IPMI v2 / RMCP+ session\n",
			BadCredentials, "RAKP 2 HMAC is invalid"},
		{"unknown user", "Loading IANA PEN Registry...\nRAKP 2 message indicates an error : unauthorized name\nError: Unable to establish IPMI v2 / RMCP+ session\n",
			BadCredentials, "RAKP 2 message indicates an error : unauthorized name"},
		{"no answer", "Loading IANA PEN Registry...\nGet Auth Capabilities error\nError issuing Get Channel Authentication Capabilities request\nError: Unable to establish IPMI v2 / RMCP+ session\n",
			Unreachable, "Error: Unable to establish IPMI v2 / RMCP+ session"},
		{"invalid data", "Invalid completion code received: Invalid command\nDiscovered IPMB address 0x0\nSet Chassis Power Control to Diag failed: Invalid data field in request\n",
			Unsupported, "Set Chassis Power Control to Diag failed: Invalid data field in request"},
		{"invalid command", "Unable to send RAW command (channel=0x0 netfn=0x0 lun=0x0 cmd=0xf rsp=0xc1): Invalid command\n",
			Unsupported, "Unable to send RAW command (channel=0x0 netfn=0x0 lun=0x0 cmd=0xf rsp=0xc1): Invalid command"},
		{"not in present state", "Set Chassis Power Control to Cycle failed: Command not supported in present state\n",
			Failed, "Set Chassis Power Control to Cycle failed: Command not supported in present state"},
		{"only chatter", "Loading IANA PEN Registry...\n", Failed, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			k, detail := classify(c.stderr)
			if k != c.want || detail != c.detail {
				t.Fatalf("got %v %q, want %v %q", k, detail, c.want, c.detail)
			}
		})
	}
}

// FuzzParse: ipmitool's output comes from the network, through ipmitool:
// no input makes the parsers panic, and what they accept is consistent.
func FuzzParse(f *testing.F) {
	f.Add(bootParam5)
	f.Add("Chassis Power is on\n")
	f.Add("> RAKP 2 HMAC is invalid\nError: Unable to establish IPMI v2 / RMCP+ session\n")
	f.Fuzz(func(t *testing.T, out string) {
		if b, err := parseBootFlags(out); err == nil && b.Device == "" {
			t.Fatalf("accepted %q without a device", out)
		}
		if s, ok := parsePowerStatus(out); !ok && s != Off {
			t.Fatalf("rejected %q with state %v", out, s)
		}
		k, detail := classify(out)
		if k > Unsupported || strings.Contains(detail, "\n") {
			t.Fatalf("classify(%q) = %v %q", out, k, detail)
		}
	})
}
