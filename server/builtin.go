package server

// Builtin returns the registry of EIM's modules, in the order they are
// built and listed (--list-modules). A module is one file, module_NAME.go:
// its registration, its Build, and the shared parts (Part) it owns, which
// other modules may use; adding one is that file and its line here.
func Builtin() *Registry {
	r, err := NewRegistry(
		apiModule(),
		onboardingModule(),
		provisioningModule(),
		hostModule(),
		maintenanceModule(),
		telemetryModule(),
		exporterModule(),
		connectModule(),
		clustersModule(),
		workloadsModule(),
		oobModule(),
		objectStorageModule(),
		webhooksModule(),
		osModule(),
		tenantModule(),
		uiModule(),
	)
	if err != nil {
		panic(err) // a fixed list: TestBuiltin fails first
	}
	return r
}
