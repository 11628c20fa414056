from partner_repo.cli import run

run()
