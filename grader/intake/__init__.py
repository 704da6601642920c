"""From files to submissions: archives, LMS export layouts, student naming, notebooks and rosters."""
