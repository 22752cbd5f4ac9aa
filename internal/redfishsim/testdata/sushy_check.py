"""Drives a Redfish BMC with OpenStack's sushy and prints what it saw.

Usage: sushy_check.py URL USER PASSWORD VERIFY STEP...
VERIFY is "false" or the path of a CA bundle. Each step prints one JSON
line; the Go test (clients_test.go) checks them and the BMC's state.
"""
import json
import sys

import sushy

url, user, password, verify = sys.argv[1:5]
steps = sys.argv[5:]
verify = False if verify == "false" else verify


def out(step, **kw):
    kw["step"] = step
    print(json.dumps(kw), flush=True)


root = sushy.Sushy(url, username=user, password=password, verify=verify)
out("connect", redfish_version=root.redfish_version,
    session=root._auth.get_session_resource_id()
    if hasattr(root._auth, "get_session_resource_id") else None)
system = root.get_system("/redfish/v1/Systems/1")
for step in steps:
    system.refresh()
    if step == "state":
        out(step, power_state=system.power_state.value if system.power_state else None,
            uuid=system.uuid, serial=system.serial_number,
            boot_target=system.boot.target.value if system.boot.target else None,
            boot_enabled=system.boot.enabled.value if system.boot.enabled else None,
            boot_mode=system.boot.mode.value if system.boot.mode else None,
            resets=sorted(v.value for v in system.get_allowed_reset_system_values()),
            targets=sorted(v.value for v in system.get_allowed_system_boot_source_values()),
            managers=[m.identity for m in system.managers])
    elif step == "on":
        system.reset_system(sushy.RESET_ON)
        out(step)
    elif step == "off":
        system.reset_system(sushy.RESET_FORCE_OFF)
        out(step)
    elif step == "graceful":
        try:
            system.reset_system(sushy.RESET_GRACEFUL_SHUTDOWN)
            out(step, status=204)
        except sushy.exceptions.HTTPError as e:
            out(step, status=e.status_code, code=e.code, detail=e.detail)
    elif step == "pxe-once":
        system.set_system_boot_options(sushy.BOOT_SOURCE_TARGET_PXE,
                                       enabled=sushy.BOOT_SOURCE_ENABLED_ONCE,
                                       mode=sushy.BOOT_SOURCE_MODE_UEFI)
        out(step)
    elif step == "bad-target":
        try:
            system.set_system_boot_options("Floppy")
            out(step, error=None)
        except sushy.exceptions.SushyError as e:
            out(step, error=type(e).__name__)
    elif step == "vmedia":
        manager = system.managers[0]
        cd = manager.virtual_media.get_member(
            manager.virtual_media.members_identities[0])
        cd.insert_media("http://eim.example/micro-os.iso")
        cd.refresh()
        inserted = (cd.inserted, cd.image)
        cd.eject_media()
        cd.refresh()
        out(step, inserted=inserted[0], image=inserted[1],
            after_eject=cd.inserted, types=[t.value for t in cd.media_types])
    else:
        raise SystemExit("unknown step " + step)
# Logs the session out, as a client done with the BMC does.
root._auth.close()
out("closed")
