package eim

// Schedule targets: exactly one of host, site or region.

// SingleSchedule is a one-off maintenance window [StartSeconds, EndSeconds).
// EndSeconds 0 means open-ended.
type SingleSchedule struct {
	Meta
	AliasID string `json:"singleScheduleID" db:"-" eim:"alias"`

	ScheduleStatus ScheduleStatus `json:"scheduleStatus" eim:"w"`
	Name           string         `json:"name" eim:"w"`
	StartSeconds   uint32         `json:"startSeconds" eim:"w"`
	EndSeconds     uint32         `json:"endSeconds" eim:"w"`
	TargetHostID   string         `json:"targetHostId" eim:"w,edge=targetHost:host"`
	TargetSiteID   string         `json:"targetSiteId" eim:"w,edge=targetSite:site"`
	TargetRegionID string         `json:"targetRegionId" eim:"w,edge=targetRegion:region"`

	// Filled on read by the inventory, never stored.
	TargetHost   *Host   `json:"targetHost,omitempty" db:"-"`
	TargetSite   *Site   `json:"targetSite,omitempty" db:"-"`
	TargetRegion *Region `json:"targetRegion,omitempty" db:"-"`
}

func (*SingleSchedule) ResourceKind() Kind { return KindSingleSchedule }

// RepeatedSchedule is a maintenance window of DurationSeconds that opens at
// every time matching its cron fields (UTC).
type RepeatedSchedule struct {
	Meta
	AliasID string `json:"repeatedScheduleID" db:"-" eim:"alias"`

	ScheduleStatus  ScheduleStatus `json:"scheduleStatus" eim:"w"`
	Name            string         `json:"name" eim:"w"`
	DurationSeconds uint32         `json:"durationSeconds" eim:"w"`
	CronMinutes     string         `json:"cronMinutes" eim:"w"`
	CronHours       string         `json:"cronHours" eim:"w"`
	CronDayMonth    string         `json:"cronDayMonth" eim:"w"`
	CronMonth       string         `json:"cronMonth" eim:"w"`
	CronDayWeek     string         `json:"cronDayWeek" eim:"w"`
	TargetHostID    string         `json:"targetHostId" eim:"w,edge=targetHost:host"`
	TargetSiteID    string         `json:"targetSiteId" eim:"w,edge=targetSite:site"`
	TargetRegionID  string         `json:"targetRegionId" eim:"w,edge=targetRegion:region"`

	// Filled on read by the inventory, never stored.
	TargetHost   *Host   `json:"targetHost,omitempty" db:"-"`
	TargetSite   *Site   `json:"targetSite,omitempty" db:"-"`
	TargetRegion *Region `json:"targetRegion,omitempty" db:"-"`
}

func (*RepeatedSchedule) ResourceKind() Kind { return KindRepeatedSchedule }
