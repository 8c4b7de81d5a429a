package conformance

import "github.com/openmhp/mhp-go"

// resetFaultChecks: 003 section 5.6, safety/reset "MUST fail with DeviceBusy
// while any job is still active", in fault as in estop. In fault the job is
// not cut off (no stop is owed after it), so only the active-job check
// refuses the reset. Catches that check removed: a driver that returns to
// idle under a running job (issue 29, item 3). A backend whose fault ends
// the job (a lost link) cannot express the check: it is skipped there.
func resetFaultChecks() []check {
	return []check{
		{name: "reset/refused_while_job_active_in_fault", run: func(c *C) {
			j := c.startBlocked(c.Dev, ActionRun)
			c.B.FailStop(true) // the fault's stop does not reach the work: it runs on
			c.B.Script(SettingFan, FailUnknown)
			_, err := c.write(c.Dev, SettingFan, true)
			c.expect(err, mhp.CodeDeviceFault)
			c.B.Script(SettingFan, Normal)
			c.waitState(mhp.StateFault)
			if got, _ := c.job(c.Other, j.ID); got == nil || got.State.Terminal() {
				// A backend whose unknown outcome is a lost link (MQTT) ends
				// every job with it: no job stays active in fault there.
				c.Skipf("the fault ended job %s on this backend (%+v): no job stays active in fault here", j.ID, got)
			}
			_, err = c.reset(c.Dev)
			if mhp.CodeOf(err) != mhp.CodeDeviceBusy {
				if got, _ := c.job(c.Other, j.ID); got != nil && got.State.Terminal() {
					c.Skipf("job %s ended %s while the reset ran: the fault ends jobs on this backend", j.ID, got.State)
				}
				c.expect(err, mhp.CodeDeviceBusy)
			}
			c.wantState(mhp.StateFault, "reset was refused while the job runs")
			c.B.Release(ActionRun)
			c.waitTerminal(j.ID)
		}},
	}
}
