from partner_repo.cli import main

main()
