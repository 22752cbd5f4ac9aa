package eim

import "encoding/json"

// The hardware children of a host, as its node reports them (the host
// module's ReportHardware). They are read-only, always read with their host,
// and stored with it: a report that changes nothing writes nothing, and a
// child that did not change keeps its timestamps.

// HostStorage is a storage device of a host.
type HostStorage struct {
	Wwid          string     `json:"wwid"`
	Serial        string     `json:"serial"`
	Vendor        string     `json:"vendor"`
	Model         string     `json:"model"`
	CapacityBytes uint64     `json:"capacityBytes,string"`
	DeviceName    string     `json:"deviceName"`
	Timestamps    Timestamps `json:"timestamps"`
}

// HostNic is a network interface of a host.
type HostNic struct {
	DeviceName    string          `json:"deviceName"`
	PciIdentifier string          `json:"pciIdentifier"`
	MacAddr       string          `json:"macAddr"`
	SriovEnabled  bool            `json:"sriovEnabled"`
	SriovVfsNum   uint32          `json:"sriovVfsNum"`
	SriovVfsTotal uint32          `json:"sriovVfsTotal"`
	Mtu           uint32          `json:"mtu"`
	LinkState     NicLinkState    `json:"linkState"`
	BmcInterface  bool            `json:"bmcInterface"`
	IPAddresses   List[IPAddress] `json:"ipaddresses"`
	Timestamps    Timestamps      `json:"timestamps"`
}

// NicLinkState is the link state of an interface and when it last changed.
type NicLinkState struct {
	Type       LinkState  `json:"type"`
	Timestamps Timestamps `json:"timestamps"`
}

// IPAddress is an address of a host's interface. Its ID ("ipaddr-…") stays
// the same for as long as the interface reports the address.
type IPAddress struct {
	ResourceID string `json:"resourceId"`
	// Address is in CIDR form: "192.0.2.10/24".
	Address      string                `json:"address"`
	Status       IPAddressStatus       `json:"status"`
	StatusDetail string                `json:"statusDetail"`
	ConfigMethod IPAddressConfigMethod `json:"configMethod"`
	Timestamps   Timestamps            `json:"timestamps"`
}

// HostUsb is a USB device of a host.
type HostUsb struct {
	IDVendor   string     `json:"idVendor"`
	IDProduct  string     `json:"idProduct"`
	Bus        uint32     `json:"bus"`
	Addr       uint32     `json:"addr"`
	Class      string     `json:"class"`
	Serial     string     `json:"serial"`
	DeviceName string     `json:"deviceName"`
	Timestamps Timestamps `json:"timestamps"`
}

// HostGpu is a GPU of a host.
type HostGpu struct {
	PciID        string       `json:"pciId"`
	Product      string       `json:"product"`
	Vendor       string       `json:"vendor"`
	Description  string       `json:"description"`
	DeviceName   string       `json:"deviceName"`
	Capabilities List[string] `json:"capabilities"`
	Timestamps   Timestamps   `json:"timestamps"`
}

// LinkState is the state of a network interface's link.
type LinkState string

const (
	LinkStateUnspecified LinkState = "NETWORK_INTERFACE_LINK_STATE_UNSPECIFIED"
	LinkStateUp          LinkState = "NETWORK_INTERFACE_LINK_STATE_UP"
	LinkStateDown        LinkState = "NETWORK_INTERFACE_LINK_STATE_DOWN"
)

// IPAddressStatus is the status of a reported address.
type IPAddressStatus string

const (
	IPAddressStatusUnspecified        IPAddressStatus = "IP_ADDRESS_STATUS_UNSPECIFIED"
	IPAddressStatusConfigured         IPAddressStatus = "IP_ADDRESS_STATUS_CONFIGURED"
	IPAddressStatusConfigurationError IPAddressStatus = "IP_ADDRESS_STATUS_CONFIGURATION_ERROR"
)

// IPAddressConfigMethod says how an address was configured.
type IPAddressConfigMethod string

const (
	IPConfigUnspecified IPAddressConfigMethod = "IP_ADDRESS_CONFIG_METHOD_UNSPECIFIED"
	IPConfigStatic      IPAddressConfigMethod = "IP_ADDRESS_CONFIG_METHOD_STATIC"
	IPConfigDynamic     IPAddressConfigMethod = "IP_ADDRESS_CONFIG_METHOD_DYNAMIC"
)

func (LinkState) Values() []string {
	return []string{"NETWORK_INTERFACE_LINK_STATE_UNSPECIFIED", "NETWORK_INTERFACE_LINK_STATE_UP", "NETWORK_INTERFACE_LINK_STATE_DOWN"}
}
func (IPAddressStatus) Values() []string {
	return []string{"IP_ADDRESS_STATUS_UNSPECIFIED", "IP_ADDRESS_STATUS_ASSIGNMENT_ERROR", "IP_ADDRESS_STATUS_ASSIGNED",
		"IP_ADDRESS_STATUS_CONFIGURATION_ERROR", "IP_ADDRESS_STATUS_CONFIGURED", "IP_ADDRESS_STATUS_RELEASED", "IP_ADDRESS_STATUS_ERROR"}
}
func (IPAddressConfigMethod) Values() []string {
	return []string{"IP_ADDRESS_CONFIG_METHOD_UNSPECIFIED", "IP_ADDRESS_CONFIG_METHOD_STATIC", "IP_ADDRESS_CONFIG_METHOD_DYNAMIC"}
}

// KindIPAddress is the ID prefix of IP addresses (they are not stored as a
// resource kind of their own).
const KindIPAddress Kind = "ipaddr"

// List is a slice that the API renders as [] when empty, never null: the
// API declares these fields arrays, and clients iterate them without a nil
// check.
type List[T any] []T

// MarshalJSON implements json.Marshaler.
func (l List[T]) MarshalJSON() ([]byte, error) {
	if l == nil {
		return []byte("[]"), nil
	}
	return json.Marshal([]T(l))
}
