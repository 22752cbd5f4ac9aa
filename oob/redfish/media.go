package redfish

import (
	"context"
	"slices"

	"github.com/stmcginnis/gofish/schemas"
)

// cd finds the system's virtual CD: in the system's own VirtualMedia
// collection (Redfish 2021.2 and later), else in its managers' (the older
// place, iDRAC, iLO, bmcweb), the first member whose MediaTypes include CD
// or DVD. nil when there is none.
func (c *Client) cd(ctx context.Context, op string) (*schemas.VirtualMedia, error) {
	_, cs, err := c.system(ctx, op)
	if err != nil {
		return nil, err
	}
	pick := func(vms []*schemas.VirtualMedia) *schemas.VirtualMedia {
		for _, vm := range vms {
			if slices.Contains(vm.MediaTypes, schemas.CDVirtualMediaType) || slices.Contains(vm.MediaTypes, schemas.DVDVirtualMediaType) {
				return vm
			}
		}
		return nil
	}
	vms, err := cs.VirtualMedia()
	if err != nil {
		return nil, c.classify(ctx, op, err)
	}
	if vm := pick(vms); vm != nil {
		return vm, nil
	}
	managers, err := cs.ManagedBy()
	if err != nil {
		return nil, c.classify(ctx, op, err)
	}
	for _, m := range managers {
		vms, err := m.VirtualMedia()
		if err != nil {
			return nil, c.classify(ctx, op, err)
		}
		if vm := pick(vms); vm != nil {
			return vm, nil
		}
	}
	return nil, nil
}

// HasVirtualCD says whether the system has a virtual CD.
func (c *Client) HasVirtualCD(ctx context.Context) (bool, error) {
	vm, err := c.cd(ctx, "find virtual media")
	return vm != nil, err
}

// InsertMedia inserts the image at url into the virtual CD (Inserted,
// WriteProtected), ejecting what it held first. A system without a
// virtual CD is ErrUnsupported.
func (c *Client) InsertMedia(ctx context.Context, url string) error {
	const op = "insert media"
	vm, err := c.cd(ctx, op)
	if err != nil {
		return err
	}
	if vm == nil {
		return &Error{Kind: Unsupported, Op: op, URL: c.root, Detail: "the system has no virtual CD"}
	}
	if vm.Inserted != nil && *vm.Inserted {
		if vm.Image == url {
			return nil
		}
		info, err := vm.EjectMedia()
		if err != nil {
			return c.classify(ctx, op, err)
		}
		if err := c.follow(ctx, op, info); err != nil {
			return err
		}
	}
	yes := true
	info, err := vm.InsertMedia(&schemas.VirtualMediaInsertMediaParameters{Image: url, Inserted: &yes, WriteProtected: &yes})
	if err != nil {
		return c.classify(ctx, op, err)
	}
	return c.follow(ctx, op, info)
}

// EjectMedia ejects the virtual CD's image (nothing when it holds none).
func (c *Client) EjectMedia(ctx context.Context) error {
	const op = "eject media"
	vm, err := c.cd(ctx, op)
	if err != nil {
		return err
	}
	if vm == nil {
		return &Error{Kind: Unsupported, Op: op, URL: c.root, Detail: "the system has no virtual CD"}
	}
	if vm.Inserted == nil || !*vm.Inserted {
		return nil
	}
	info, err := vm.EjectMedia()
	if err != nil {
		return c.classify(ctx, op, err)
	}
	return c.follow(ctx, op, info)
}
