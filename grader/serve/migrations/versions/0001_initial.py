"""The server's first tables: users, invites, submissions, regrades, manual scores, audit, LTI

Revision ID: 0001
Revises:
Create Date: 2026-12-05 11:58:10.815312

"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision: str = "0001"
down_revision: str | Sequence[str] | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Create every table of the first schema."""
    _audit_settings_and_lti()
    _users_invites_and_links()
    _manual_scores_and_pushes()
    _submissions()


def _audit_settings_and_lti() -> None:
    op.create_table(
        "audit",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("actor", sa.String(length=200), nullable=False),
        sa.Column("address", sa.String(length=100), nullable=False),
        sa.Column("action", sa.String(length=100), nullable=False),
        sa.Column("detail", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("audit", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_audit_at"), ["at"], unique=False)

    op.create_table(
        "lti_nonces",
        sa.Column("value", sa.String(length=200), nullable=False),
        sa.Column("used", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("value"),
    )
    op.create_table(
        "lti_states",
        sa.Column("state", sa.String(length=100), nullable=False),
        sa.Column("nonce", sa.String(length=100), nullable=False),
        sa.Column("issuer", sa.String(length=500), nullable=False),
        sa.Column("client_id", sa.String(length=300), nullable=False),
        sa.Column("created", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("state"),
    )
    op.create_table(
        "regrades",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("by", sa.String(length=200), nullable=False),
        sa.Column("created", sa.DateTime(timezone=True), nullable=False),
        sa.Column("count", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_table(
        "settings",
        sa.Column("key", sa.String(length=100), nullable=False),
        sa.Column("value", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("key"),
    )


def _users_invites_and_links() -> None:
    op.create_table(
        "users",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("login", sa.String(length=200), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("email", sa.String(length=320), nullable=False),
        sa.Column("role", sa.String(length=20), nullable=False),
        sa.Column("issuer", sa.String(length=500), nullable=True),
        sa.Column("subject", sa.String(length=300), nullable=True),
        sa.Column("last_upload", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("issuer", "subject"),
        sa.UniqueConstraint("login"),
    )
    op.create_table(
        "invites",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("token_hash", sa.String(length=64), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("created", sa.DateTime(timezone=True), nullable=False),
        sa.Column("used", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["user_id"],
            ["users.id"],
        ),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("token_hash"),
    )
    op.create_table(
        "lti_links",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("issuer", sa.String(length=500), nullable=False),
        sa.Column("client_id", sa.String(length=300), nullable=False),
        sa.Column("lineitem_url", sa.String(length=2000), nullable=True),
        sa.Column("subject", sa.String(length=300), nullable=False),
        sa.ForeignKeyConstraint(
            ["user_id"],
            ["users.id"],
        ),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("user_id"),
    )


def _manual_scores_and_pushes() -> None:
    op.create_table(
        "manual_scores",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("target", sa.String(length=200), nullable=False),
        sa.Column("points", sa.Float(), nullable=False),
        sa.Column("comment", sa.Text(), nullable=False),
        sa.Column("grader", sa.String(length=200), nullable=False),
        sa.Column("updated", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["user_id"],
            ["users.id"],
        ),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("user_id", "target"),
    )
    with op.batch_alter_table("manual_scores", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_manual_scores_user_id"), ["user_id"], unique=False)

    op.create_table(
        "pushes",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("reason", sa.String(length=50), nullable=False),
        sa.Column("created", sa.DateTime(timezone=True), nullable=False),
        sa.Column("state", sa.String(length=10), nullable=False),
        sa.Column("score", sa.Float(), nullable=True),
        sa.Column("max_score", sa.Float(), nullable=True),
        sa.Column("status", sa.Integer(), nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("detail", sa.Text(), nullable=False),
        sa.Column("done", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["user_id"],
            ["users.id"],
        ),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("pushes", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_pushes_state"), ["state"], unique=False)
        batch_op.create_index(batch_op.f("ix_pushes_user_id"), ["user_id"], unique=False)


def _submissions() -> None:
    op.create_table(
        "submissions",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("number", sa.Integer(), nullable=False),
        sa.Column("filename", sa.String(length=40), nullable=False),
        sa.Column("sha256", sa.String(length=64), nullable=False),
        sa.Column("size", sa.Integer(), nullable=False),
        sa.Column("received", sa.DateTime(timezone=True), nullable=False),
        sa.Column("state", sa.String(length=10), nullable=False),
        sa.Column("started", sa.DateTime(timezone=True), nullable=True),
        sa.Column("graded", sa.DateTime(timezone=True), nullable=True),
        sa.Column("details", sa.Boolean(), nullable=False),
        sa.Column("score", sa.Float(), nullable=True),
        sa.Column("max_score", sa.Float(), nullable=True),
        sa.Column("visible_score", sa.Float(), nullable=True),
        sa.Column("visible_max", sa.Float(), nullable=True),
        sa.Column("visible", sa.JSON(), nullable=True),
        sa.Column("full", sa.JSON(), nullable=True),
        sa.Column("previous", sa.JSON(), nullable=True),
        sa.Column("regrade_id", sa.Integer(), nullable=True),
        sa.Column("spec_hash", sa.String(length=64), nullable=False),
        sa.ForeignKeyConstraint(
            ["regrade_id"],
            ["regrades.id"],
        ),
        sa.ForeignKeyConstraint(
            ["user_id"],
            ["users.id"],
        ),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("submissions", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_submissions_received"), ["received"], unique=False)
        batch_op.create_index(batch_op.f("ix_submissions_state"), ["state"], unique=False)
        batch_op.create_index(batch_op.f("ix_submissions_user_id"), ["user_id"], unique=False)


def downgrade() -> None:
    """Downgrade schema."""
    with op.batch_alter_table("submissions", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_submissions_user_id"))
        batch_op.drop_index(batch_op.f("ix_submissions_state"))
        batch_op.drop_index(batch_op.f("ix_submissions_received"))

    op.drop_table("submissions")
    with op.batch_alter_table("pushes", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_pushes_user_id"))
        batch_op.drop_index(batch_op.f("ix_pushes_state"))

    op.drop_table("pushes")
    with op.batch_alter_table("manual_scores", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_manual_scores_user_id"))

    op.drop_table("manual_scores")
    op.drop_table("lti_links")
    op.drop_table("invites")
    op.drop_table("users")
    op.drop_table("settings")
    op.drop_table("regrades")
    op.drop_table("lti_states")
    op.drop_table("lti_nonces")
    with op.batch_alter_table("audit", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_audit_at"))

    op.drop_table("audit")
