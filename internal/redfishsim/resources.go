package redfishsim

import (
	"context"
	"slices"
)

func link(path string) map[string]any { return map[string]any{"@odata.id": path} }

func systemPath(s *system) string  { return "/redfish/v1/Systems/" + s.id }
func managerPath(s *system) string { return "/redfish/v1/Managers/" + s.managerID }
func chassisPath(s *system) string { return "/redfish/v1/Chassis/" + s.id }
func cdPath(s *system) string      { return managerPath(s) + "/VirtualMedia/Cd" }

// root is the service root (ServiceRoot.v1_x), readable without credentials.
func (b *BMC) root() map[string]any {
	return map[string]any{
		"@odata.id":      "/redfish/v1/",
		"@odata.type":    "#ServiceRoot.v1_11_0.ServiceRoot",
		"Id":             "RootService",
		"Name":           "Root Service",
		"RedfishVersion": "1.15.0",
		"UUID":           b.systems[0].uuid,
		"Product":        "EIM Redfish test BMC",
		"Vendor":         "EIM",
		"Systems":        link("/redfish/v1/Systems"),
		"Managers":       link("/redfish/v1/Managers"),
		"Chassis":        link("/redfish/v1/Chassis"),
		"SessionService": link("/redfish/v1/SessionService"),
		"Links":          map[string]any{"Sessions": link("/redfish/v1/SessionService/Sessions")},
	}
}

func (b *BMC) collection(path, typ, name string, member func(*system) string) map[string]any {
	members := make([]any, len(b.systems))
	for i, s := range b.systems {
		members[i] = link(member(s))
	}
	return map[string]any{
		"@odata.id":           path,
		"@odata.type":         typ,
		"Name":                name,
		"Members":             members,
		"Members@odata.count": len(members),
	}
}

// systemResource is a ComputerSystem (v1_13: HttpBootUri is v1_9).
func (b *BMC) systemResource(ctx context.Context, s *system) map[string]any {
	faults := b.Faults()
	state, err := s.machine.PowerState(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	boot := map[string]any{
		"BootSourceOverrideTarget":                          s.target,
		"BootSourceOverrideTarget@Redfish.AllowableValues":  s.targets,
		"BootSourceOverrideEnabled":                         s.enabled,
		"BootSourceOverrideEnabled@Redfish.AllowableValues": []string{"Disabled", "Once", "Continuous"},
		"HttpBootUri": s.httpBootURI,
	}
	if !faults.NoBootMode {
		boot["BootSourceOverrideMode"] = s.mode
		boot["BootSourceOverrideMode@Redfish.AllowableValues"] = []string{"Legacy", "UEFI"}
	}
	status := map[string]any{"State": "Enabled", "Health": "OK"}
	v := map[string]any{
		"@odata.id":    systemPath(s),
		"@odata.type":  "#ComputerSystem.v1_13_0.ComputerSystem",
		"Id":           s.id,
		"Name":         "System " + s.id,
		"SystemType":   "Physical",
		"Manufacturer": "EIM",
		"Model":        "Redfish test BMC",
		"SerialNumber": s.serial,
		"UUID":         s.uuid,
		"AssetTag":     s.assetTag,
		"BiosVersion":  "sim-1.0",
		"Status":       status,
		"Boot":         boot,
		"Actions": map[string]any{"#ComputerSystem.Reset": map[string]any{
			"target":                            systemPath(s) + "/Actions/ComputerSystem.Reset",
			"ResetType@Redfish.AllowableValues": s.resetTypes,
		}},
		"Links": map[string]any{
			"ManagedBy": []any{link(managerPath(s))},
			"Chassis":   []any{link(chassisPath(s))},
		},
	}
	if err != nil { // the machine cannot be read: no PowerState, as BMCs leave it out
		status["Health"] = "Warning"
	} else {
		v["PowerState"] = string(state)
	}
	return v
}

func managerResource(s *system) map[string]any {
	return map[string]any{
		"@odata.id":       managerPath(s),
		"@odata.type":     "#Manager.v1_10_0.Manager",
		"Id":              s.managerID,
		"Name":            "Manager " + s.managerID,
		"ManagerType":     "BMC",
		"FirmwareVersion": "redfishsim-1",
		"PowerState":      "On",
		"Status":          map[string]any{"State": "Enabled", "Health": "OK"},
		"VirtualMedia":    link(managerPath(s) + "/VirtualMedia"),
		"Links": map[string]any{
			"ManagerForServers": []any{link(systemPath(s))},
			"ManagerForChassis": []any{link(chassisPath(s))},
		},
	}
}

func cdResource(s *system, noActions bool) map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	image, name, via := "", "", "NotConnected"
	if s.inserted {
		image, name, via = s.image, imageName(s.image), "URI"
	}
	res := map[string]any{
		"@odata.id":      cdPath(s),
		"@odata.type":    "#VirtualMedia.v1_3_0.VirtualMedia",
		"Id":             "Cd",
		"Name":           "Virtual CD",
		"MediaTypes":     []string{"CD", "DVD"},
		"Image":          image,
		"ImageName":      name,
		"Inserted":       s.inserted,
		"WriteProtected": s.writeProtected,
		"ConnectedVia":   via,
		"TransferMethod": "Stream",
		"Actions": map[string]any{
			"#VirtualMedia.InsertMedia": map[string]any{"target": cdPath(s) + "/Actions/VirtualMedia.InsertMedia"},
			"#VirtualMedia.EjectMedia":  map[string]any{"target": cdPath(s) + "/Actions/VirtualMedia.EjectMedia"},
		},
	}
	if noActions {
		delete(res, "Actions")
	}
	return res
}

func imageName(url string) string {
	for i := len(url) - 1; i >= 0; i-- {
		if url[i] == '/' {
			return url[i+1:]
		}
	}
	return url
}

func chassisResource(s *system) map[string]any {
	return map[string]any{
		"@odata.id":   chassisPath(s),
		"@odata.type": "#Chassis.v1_14_0.Chassis",
		"Id":          s.id,
		"Name":        "Chassis " + s.id,
		"ChassisType": "RackMount",
		"Status":      map[string]any{"State": "Enabled", "Health": "OK"},
		"Links": map[string]any{
			"ComputerSystems": []any{link(systemPath(s))},
			"ManagedBy":       []any{link(managerPath(s))},
		},
	}
}

// odataDocument is the OData service document (/redfish/v1/odata).
func odataDocument() map[string]any {
	var values []any
	for _, name := range slices.Sorted(slices.Values([]string{"Systems", "Managers", "Chassis", "SessionService", "Sessions"})) {
		url := "/redfish/v1/" + name
		if name == "Sessions" {
			url = "/redfish/v1/SessionService/Sessions"
		}
		kind := "EntitySet"
		if name == "SessionService" {
			kind = "Singleton"
		}
		values = append(values, map[string]any{"name": name, "kind": kind, "url": url})
	}
	return map[string]any{"@odata.context": "/redfish/v1/$metadata", "value": values}
}

// metadataDocument is the CSDL document (/redfish/v1/$metadata): references
// to the DMTF schemas of the types the service uses.
const metadataDocument = `<?xml version="1.0" encoding="UTF-8"?>
<edmx:Edmx xmlns:edmx="http://docs.oasis-open.org/odata/ns/edmx" Version="4.0">
  <edmx:Reference Uri="http://redfish.dmtf.org/schemas/v1/ServiceRoot_v1.xml">
    <edmx:Include Namespace="ServiceRoot"/>
    <edmx:Include Namespace="ServiceRoot.v1_11_0"/>
  </edmx:Reference>
  <edmx:Reference Uri="http://redfish.dmtf.org/schemas/v1/ComputerSystemCollection_v1.xml">
    <edmx:Include Namespace="ComputerSystemCollection"/>
  </edmx:Reference>
  <edmx:Reference Uri="http://redfish.dmtf.org/schemas/v1/ComputerSystem_v1.xml">
    <edmx:Include Namespace="ComputerSystem"/>
    <edmx:Include Namespace="ComputerSystem.v1_13_0"/>
  </edmx:Reference>
  <edmx:Reference Uri="http://redfish.dmtf.org/schemas/v1/ManagerCollection_v1.xml">
    <edmx:Include Namespace="ManagerCollection"/>
  </edmx:Reference>
  <edmx:Reference Uri="http://redfish.dmtf.org/schemas/v1/Manager_v1.xml">
    <edmx:Include Namespace="Manager"/>
    <edmx:Include Namespace="Manager.v1_10_0"/>
  </edmx:Reference>
  <edmx:Reference Uri="http://redfish.dmtf.org/schemas/v1/VirtualMediaCollection_v1.xml">
    <edmx:Include Namespace="VirtualMediaCollection"/>
  </edmx:Reference>
  <edmx:Reference Uri="http://redfish.dmtf.org/schemas/v1/VirtualMedia_v1.xml">
    <edmx:Include Namespace="VirtualMedia"/>
    <edmx:Include Namespace="VirtualMedia.v1_3_0"/>
  </edmx:Reference>
  <edmx:Reference Uri="http://redfish.dmtf.org/schemas/v1/ChassisCollection_v1.xml">
    <edmx:Include Namespace="ChassisCollection"/>
  </edmx:Reference>
  <edmx:Reference Uri="http://redfish.dmtf.org/schemas/v1/Chassis_v1.xml">
    <edmx:Include Namespace="Chassis"/>
    <edmx:Include Namespace="Chassis.v1_14_0"/>
  </edmx:Reference>
  <edmx:Reference Uri="http://redfish.dmtf.org/schemas/v1/SessionService_v1.xml">
    <edmx:Include Namespace="SessionService"/>
    <edmx:Include Namespace="SessionService.v1_1_8"/>
  </edmx:Reference>
  <edmx:Reference Uri="http://redfish.dmtf.org/schemas/v1/SessionCollection_v1.xml">
    <edmx:Include Namespace="SessionCollection"/>
  </edmx:Reference>
  <edmx:Reference Uri="http://redfish.dmtf.org/schemas/v1/Session_v1.xml">
    <edmx:Include Namespace="Session"/>
    <edmx:Include Namespace="Session.v1_3_0"/>
  </edmx:Reference>
  <edmx:Reference Uri="http://redfish.dmtf.org/schemas/v1/Message_v1.xml">
    <edmx:Include Namespace="Message"/>
    <edmx:Include Namespace="Message.v1_1_1"/>
  </edmx:Reference>
  <edmx:DataServices>
    <Schema xmlns="http://docs.oasis-open.org/odata/ns/edm" Namespace="Service">
      <EntityContainer Name="Service" Extends="ServiceRoot.v1_11_0.ServiceContainer"/>
    </Schema>
  </edmx:DataServices>
</edmx:Edmx>
`
