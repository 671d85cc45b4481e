// SPDX-License-Identifier: GPL-2.0
/*
 * No programs: this object only anchors the shared types in BTF so bpf2go
 * can generate their Go twins with -type, and holds the canonical map specs
 * the loader creates once for every other object.
 */
#include "common.h"

const struct event *unused_event __attribute__((unused));
const struct stack_event *unused_stack_event __attribute__((unused));
const struct hist_key *unused_hist_key __attribute__((unused));
const struct hist *unused_hist __attribute__((unused));
const struct thread_counts *unused_thread_counts __attribute__((unused));
const struct migr_rec *unused_migr_rec __attribute__((unused));
const enum cause *unused_cause __attribute__((unused));
const enum event_kind *unused_kind __attribute__((unused));
const enum event_flag *unused_flag __attribute__((unused));
const enum counter_id *unused_counter __attribute__((unused));
const enum filter_mode *unused_filter __attribute__((unused));
const struct lat_sample *unused_lat_sample __attribute__((unused));
const enum lat_flag *unused_lat_flag __attribute__((unused));
const struct child_total *unused_child_total __attribute__((unused));
const enum pending_slot *unused_slot __attribute__((unused));
const enum memstall_reason *unused_memstall_reason __attribute__((unused));
const enum wait_part *unused_wait_part __attribute__((unused));
