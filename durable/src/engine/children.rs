//! Child sessions from the parent's side: whether one more may be made and as whom, and
//! which children this session has. The Worker makes the child; the parent keeps the list.

use super::{internal, EngineResult, Session};
use crate::store::{Cols, Store};
use inspect_protocol::session::{
    check_attempts, Actor, AttemptGroup, AttemptsPlan, AttemptsRequest, ChildPlan, RepositoryRef,
    SpawnChildRequest, CHILD_RESERVATION_MS, CHILD_RESERVATION_PREFIX, MAX_CHILDREN,
    MAX_CHILD_DEPTH,
};
use inspect_protocol::{ApiError, ErrorCode};

impl<S: Store> Session<'_, S> {
    /// Checks a spawn request and says how the child is made: as the parent's running
    /// prompt's author, on the repository asked for (one of the parent's) or the parent's
    /// repositories, one level deeper.
    pub fn child_plan(&self, req: &SpawnChildRequest) -> EngineResult<ChildPlan> {
        let state = self.state()?;
        if req.prompt.trim().is_empty()
            || req.prompt.len() > inspect_protocol::limits::MAX_PROMPT_BYTES
        {
            return Err(ApiError::bad_request(
                "a child needs a prompt (at most 64 KiB)",
            ));
        }
        let depth = state.depth + 1;
        if depth > MAX_CHILD_DEPTH {
            return Err(ApiError::new(
                ErrorCode::Conflict,
                format!("child sessions nest at most {MAX_CHILD_DEPTH} deep; this session is at depth {}", state.depth),
            ));
        }
        let children = self.children()?;
        if children.len() >= MAX_CHILDREN {
            return Err(ApiError::new(
                ErrorCode::Conflict,
                format!("a session may make at most {MAX_CHILDREN} children"),
            ));
        }
        let repositories = match (&req.repo_owner, &req.repo_name) {
            (Some(o), Some(n)) => vec![RepositoryRef {
                owner: o.clone(),
                name: n.clone(),
                branch: req.branch.clone(),
                source: None,
            }],
            (None, None) => state
                .repositories
                .iter()
                .map(|r| RepositoryRef {
                    source: None,
                    branch: req.branch.clone().or(r.branch.clone()),
                    ..r.clone()
                })
                .collect(),
            _ => {
                return Err(ApiError::bad_request(
                    "name both repoOwner and repoName, or neither",
                ))
            }
        };
        // The child acts for whoever is prompting the parent now (else its creator).
        let user = self.pr_user()?;
        let actor = match self.participant_by_user(&user)? {
            Some(p) => Actor {
                user_id: p.user_id,
                name: p.name,
                email: None,
                avatar: p.avatar,
            },
            None => Actor {
                user_id: user.clone(),
                name: user,
                email: None,
                avatar: None,
            },
        };
        let title = req
            .title
            .clone()
            .filter(|t| !t.trim().is_empty())
            .unwrap_or_else(|| {
                req.prompt
                    .lines()
                    .next()
                    .unwrap_or("child")
                    .chars()
                    .take(60)
                    .collect()
            });
        Ok(ChildPlan {
            actor,
            repositories,
            depth,
            title,
            model: req.model.clone().or(state.model),
            children,
            reservation: None,
            agent: None,
        })
    }

    /// "Try N ways": a slot for each attempt (children acting for `actor`, the person who
    /// asked, on this session's repositories, one model each when named) and the group
    /// they belong to. Over the children's limits the whole request is refused, in words.
    pub fn reserve_attempts(
        &self,
        req: &AttemptsRequest,
        actor: &Actor,
        now: i64,
    ) -> EngineResult<AttemptsPlan> {
        check_attempts(req).map_err(ApiError::bad_request)?;
        self.lapse_reservations(now)?;
        let state = self.state()?;
        let depth = state.depth + 1;
        if depth > MAX_CHILD_DEPTH {
            return Err(ApiError::bad_request(format!(
                "child sessions nest at most {MAX_CHILD_DEPTH} deep; this session is at depth {}",
                state.depth
            )));
        }
        if state.repositories.is_empty() {
            return Err(ApiError::bad_request(
                "attempts work on the session's repositories, and this session has none",
            ));
        }
        let children = self.children()?;
        if children.len() + req.count > MAX_CHILDREN {
            return Err(ApiError::bad_request(format!(
                "a session makes at most {MAX_CHILDREN} children; this one has {}, so at most {} more attempts",
                children.len(),
                MAX_CHILDREN - children.len()
            )));
        }
        let group = super::ids::new_id("try");
        let first_line: String = req
            .content
            .lines()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("attempt")
            .trim()
            .chars()
            .take(50)
            .collect();
        let repositories: Vec<RepositoryRef> = state
            .repositories
            .iter()
            .map(|r| RepositoryRef {
                source: None,
                ..r.clone()
            })
            .collect();
        let mut plans = Vec::with_capacity(req.count);
        for i in 0..req.count {
            let slot = format!("{CHILD_RESERVATION_PREFIX}{}", super::ids::new_id("child"));
            let title = format!("Attempt {} of {}: {first_line}", i + 1, req.count);
            self.store
                .execute(
                    "INSERT INTO children (session_id, title, created_at, attempt) VALUES (?, ?, ?, ?)",
                    &[
                        slot.as_str().into(),
                        title.as_str().into(),
                        (now + i as i64).into(),
                        group.as_str().into(),
                    ],
                )
                .map_err(internal)?;
            plans.push(ChildPlan {
                actor: actor.clone(),
                repositories: repositories.clone(),
                depth,
                title,
                model: req.models.get(i).cloned().or(state.model.clone()),
                children: children.clone(),
                reservation: Some(slot),
                agent: Some(req.agents.get(i).copied().unwrap_or(state.agent)),
            });
        }
        self.store
            .execute(
                "INSERT INTO attempt_groups (grp, prompt, created_at) VALUES (?, ?, ?)",
                &[
                    group.as_str().into(),
                    req.content.as_str().into(),
                    now.into(),
                ],
            )
            .map_err(internal)?;
        Ok(AttemptsPlan { group, plans })
    }

    /// The groups of attempts made here, oldest first, each with its children in order
    /// (a group none of whose children was made is left out).
    pub fn attempt_groups(&self) -> EngineResult<Vec<AttemptGroup>> {
        let rows = self
            .store
            .query(
                "SELECT grp, prompt, chosen FROM attempt_groups ORDER BY created_at, grp",
                &[],
            )
            .map_err(internal)?;
        let mut groups = Vec::new();
        for row in rows {
            let mut c = Cols::new(row);
            let (group, prompt, chosen) = (
                c.string().map_err(internal)?,
                c.string().map_err(internal)?,
                c.opt_string().map_err(internal)?,
            );
            let sessions = self
                .store
                .query(
                    "SELECT session_id FROM children WHERE attempt = ? AND session_id NOT LIKE 'reserved:%' ORDER BY created_at, session_id",
                    &[group.as_str().into()],
                )
                .map_err(internal)?
                .into_iter()
                .map(|r| Cols::new(r).string().map_err(internal))
                .collect::<EngineResult<Vec<String>>>()?;
            if !sessions.is_empty() {
                groups.push(AttemptGroup {
                    group,
                    prompt,
                    sessions,
                    chosen,
                });
            }
        }
        Ok(groups)
    }

    /// "Use this one": marks the attempt chosen in its group; the group (with the others
    /// to stop). Choosing again the one chosen is allowed (a retried click); another one
    /// of a group already decided is refused.
    pub fn choose_attempt(&self, session_id: &str) -> EngineResult<AttemptGroup> {
        let not_one = || {
            ApiError::not_found(format!(
                "{session_id} is not one of this session's attempts"
            ))
        };
        let rows = self
            .store
            .query(
                "SELECT attempt FROM children WHERE session_id = ? AND attempt IS NOT NULL",
                &[session_id.into()],
            )
            .map_err(internal)?;
        let group = match rows.into_iter().next() {
            Some(row) => Cols::new(row).string().map_err(internal)?,
            None => return Err(not_one()),
        };
        let mut found = self
            .attempt_groups()?
            .into_iter()
            .find(|g| g.group == group)
            .ok_or_else(not_one)?;
        match &found.chosen {
            Some(chosen) if chosen != session_id => {
                return Err(ApiError::new(
                    ErrorCode::Conflict,
                    format!("these attempts are decided already: {chosen} was chosen"),
                ))
            }
            _ => {}
        }
        self.store
            .execute(
                "UPDATE attempt_groups SET chosen = ? WHERE grp = ?",
                &[session_id.into(), group.as_str().into()],
            )
            .map_err(internal)?;
        found.chosen = Some(session_id.to_owned());
        Ok(found)
    }

    fn lapse_reservations(&self, now: i64) -> EngineResult<()> {
        self.store
            .execute(
                "DELETE FROM children WHERE session_id LIKE 'reserved:%' AND created_at < ?",
                &[(now - CHILD_RESERVATION_MS).into()],
            )
            .map_err(internal)
    }

    /// [`Self::child_plan`], holding a slot for the child while the Worker makes it: two
    /// spawns at once cannot both take the last one. Slots left by a Worker that never came
    /// back lapse after two minutes.
    pub fn reserve_child(&self, req: &SpawnChildRequest, now: i64) -> EngineResult<ChildPlan> {
        self.lapse_reservations(now)?;
        let mut plan = self.child_plan(req)?;
        let slot = format!("{CHILD_RESERVATION_PREFIX}{}", super::ids::new_id("child"));
        self.store
            .execute(
                "INSERT INTO children (session_id, title, created_at) VALUES (?, ?, ?)",
                &[slot.as_str().into(), plan.title.as_str().into(), now.into()],
            )
            .map_err(internal)?;
        plan.reservation = Some(slot);
        Ok(plan)
    }

    /// Records a child this session made, in its reserved slot when it had one.
    pub fn record_child(
        &self,
        session_id: &str,
        title: &str,
        reservation: Option<&str>,
        now: i64,
    ) -> EngineResult<()> {
        if let Some(slot) = reservation.filter(|r| r.starts_with(CHILD_RESERVATION_PREFIX)) {
            let moved = self
                .store
                .query(
                    "UPDATE children SET session_id = ?, title = ? WHERE session_id = ? RETURNING session_id",
                    &[session_id.into(), title.into(), slot.into()],
                )
                .map_err(internal)?;
            if !moved.is_empty() {
                return Ok(());
            }
        }
        self.store
            .execute(
                "INSERT OR IGNORE INTO children (session_id, title, created_at) VALUES (?, ?, ?)",
                &[session_id.into(), title.into(), now.into()],
            )
            .map_err(internal)
    }

    /// Gives back a slot whose child was not made.
    pub fn release_child(&self, reservation: &str) -> EngineResult<()> {
        if !reservation.starts_with(CHILD_RESERVATION_PREFIX) {
            return Ok(());
        }
        self.store
            .execute(
                "DELETE FROM children WHERE session_id = ?",
                &[reservation.into()],
            )
            .map_err(internal)
    }

    /// The children this session made, oldest first.
    pub fn children(&self) -> EngineResult<Vec<String>> {
        let rows = self
            .store
            .query(
                "SELECT session_id FROM children ORDER BY created_at, session_id",
                &[],
            )
            .map_err(internal)?;
        rows.into_iter()
            .map(|r| Cols::new(r).string().map_err(internal))
            .collect()
    }
}
