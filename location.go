package eim

// Region is a node of the location tree; regions nest up to MaxRegionDepth.
type Region struct {
	Meta
	AliasID string `json:"regionID" db:"-" eim:"alias"`

	Name     string   `json:"name" eim:"w"`
	ParentID string   `json:"parentId" eim:"w,edge=parentRegion:region"`
	Metadata Metadata `json:"metadata" eim:"w"`

	// Filled on read by the inventory, never stored.
	ParentRegion      *Region  `json:"parentRegion" db:"-"`
	InheritedMetadata Metadata `json:"inheritedMetadata" db:"-"`
	TotalSites        *int     `json:"totalSites" db:"-"`
}

func (*Region) ResourceKind() Kind { return KindRegion }

// MaxRegionDepth is how deep regions may nest (a root region is depth 1).
const MaxRegionDepth = 5

// Site is a place where hosts are: a factory, a store, a cell site.
type Site struct {
	Meta
	AliasID string `json:"siteID" db:"-" eim:"alias"`

	Name     string   `json:"name" eim:"w"`
	RegionID string   `json:"regionId" eim:"w,edge=region:region"`
	SiteLat  int32    `json:"siteLat" eim:"w"`
	SiteLng  int32    `json:"siteLng" eim:"w"`
	Metadata Metadata `json:"metadata" eim:"w"`
	// PowerPolicy is the power policy of the site's hosts whose BMC sets
	// none (our extension: see PowerPolicy; "" unset).
	PowerPolicy PowerPolicy `json:"powerPolicy,omitempty" eim:"w"`

	// Filled on read by the inventory, never stored.
	Region            *Region  `json:"region" db:"-"`
	InheritedMetadata Metadata `json:"inheritedMetadata" db:"-"`
}

func (*Site) ResourceKind() Kind { return KindSite }
