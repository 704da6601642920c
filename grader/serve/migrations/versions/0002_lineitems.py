"""LTI links keep the line items container and the resource link, for platforms that couple no line item;
a student's submission numbers are unique

Revision ID: 0002
Revises: 0001
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | Sequence[str] | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Add ``lineitems_url`` and ``resource_link_id`` to ``lti_links``; one number per submission of a student."""
    with op.batch_alter_table("lti_links", schema=None) as batch_op:
        batch_op.add_column(sa.Column("lineitems_url", sa.String(length=2000), nullable=True))
        batch_op.add_column(sa.Column("resource_link_id", sa.String(length=300), nullable=False, server_default=""))
    with op.batch_alter_table("submissions", schema=None) as batch_op:
        batch_op.create_unique_constraint("uq_submissions_user_id_number", ["user_id", "number"])


def downgrade() -> None:
    """Drop them."""
    with op.batch_alter_table("submissions", schema=None) as batch_op:
        batch_op.drop_constraint("uq_submissions_user_id_number", type_="unique")
    with op.batch_alter_table("lti_links", schema=None) as batch_op:
        batch_op.drop_column("resource_link_id")
        batch_op.drop_column("lineitems_url")
