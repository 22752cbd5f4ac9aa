// Package agent is the node side of EIM's southbound protocol: in the
// micro-OS it discovers the server, onboards, and runs the provisioning
// workflow (Provisioner); on the installed OS it reports in (Node). It
// defines the interfaces it consumes (Executor) and never links the server's
// store.
package agent

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"

	provisioningv1 "github.com/eimhq/eim/proto/eim/provisioning/v1"
)

// Identity is what a machine presents to Discover.
type Identity struct {
	UUID       string
	Serial     string
	Hostname   string
	Interfaces []Interface
	// SecureBoot is the firmware's Secure Boot state (ReadSecureBoot),
	// sent at Discover and with the request for the workflow.
	SecureBoot provisioningv1.SecureBootState
	// MeasuredBoot is what the TPM measured of this boot
	// (ReadMeasuredBoot), sent with the request for the workflow too.
	MeasuredBoot *provisioningv1.MeasuredBoot
}

// Interface is a network interface of the machine.
type Interface struct {
	Name  string
	MAC   string   // lower-case colon form
	Addrs []string // CIDR form
}

// ReadIdentity reads the machine's SMBIOS UUID and serial below sysRoot
// (sys/class/dmi/id/product_uuid, product_serial; "/" on a real machine),
// its hostname and its network interfaces, loopback and interfaces without a
// MAC skipped. A missing DMI file leaves the field empty; the server decides
// whether what is left identifies the machine.
func ReadIdentity(sysRoot string) (Identity, error) {
	var id Identity
	dmi := filepath.Join(sysRoot, "sys", "class", "dmi", "id")
	var err error
	id.SecureBoot = ReadSecureBoot(sysRoot)
	id.MeasuredBoot = ReadMeasuredBoot(sysRoot)
	if id.UUID, err = readTrimmed(filepath.Join(dmi, "product_uuid")); err != nil {
		return Identity{}, err
	}
	id.UUID = strings.ToLower(id.UUID)
	if id.Serial, err = readTrimmed(filepath.Join(dmi, "product_serial")); err != nil {
		return Identity{}, err
	}
	if h, err := os.Hostname(); err == nil {
		id.Hostname = h
	}
	ifs, err := net.Interfaces()
	if err != nil {
		return Identity{}, fmt.Errorf("list network interfaces: %w", err)
	}
	for _, ifc := range ifs {
		if ifc.Flags&net.FlagLoopback != 0 || len(ifc.HardwareAddr) == 0 {
			continue
		}
		i := Interface{Name: ifc.Name, MAC: strings.ToLower(ifc.HardwareAddr.String())}
		if addrs, err := ifc.Addrs(); err == nil {
			for _, a := range addrs {
				i.Addrs = append(i.Addrs, a.String())
			}
		}
		id.Interfaces = append(id.Interfaces, i)
	}
	if id.UUID == "" && id.Serial == "" {
		return id, fmt.Errorf("no SMBIOS UUID or serial below %s", dmi)
	}
	return id, nil
}

// readTrimmed returns the file's content without surrounding space; a
// missing file is "".
func readTrimmed(path string) (string, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read identity: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}
